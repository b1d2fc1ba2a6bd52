"""Environment names: `my-env` is the id, `my_env` the module and folder name; `owner/my-env` is my-env
published on the package index named `owner`."""

from __future__ import annotations

import re

from prime_cli.envs.loader import module_name  # noqa: F401  (`owner/` dropped, dashes to underscores)

from .errors import WorkspaceError

VALID_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def check_env_name(name: str) -> str:
    """The name, stripped, or WorkspaceError saying why it cannot name an environment."""
    name = name.strip()
    if "/" in name or "\\" in name or ".." in name:
        raise WorkspaceError(
            f"environment name {name!r} contains a path separator or '..'; use a plain name like 'my-env' "
            "(to install a folder, give `prime env install` its path)"
        )
    if not VALID_NAME.match(name):
        raise WorkspaceError(
            f"environment name {name!r} is not valid; start with a letter and use only letters, digits, "
            "'-' and '_' (at most 64 characters), e.g. 'my-env'"
        )
    return name


OWNER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def is_owner(owner: str) -> bool:
    """Whether `owner` can be the OWNER of OWNER/my-env (the name of a package index, not a path)."""
    return bool(OWNER.match(owner)) and ".." not in owner


def check_env_id(env_id: str) -> str:
    """`my-env` or `owner/my-env` (as `prime eval run` takes them), stripped, or WorkspaceError."""
    env_id = env_id.strip()
    owner, _, name = env_id.rpartition("/")
    if "/" in owner or (owner and not is_owner(owner)):
        check_env_name(env_id)  # raises: a path, not owner/name
    return f"{owner}/{check_env_name(name)}" if owner else check_env_name(name)


def dist_name(name: str) -> str:
    return name.replace("_", "-").lower()
