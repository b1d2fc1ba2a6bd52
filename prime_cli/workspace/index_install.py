"""`prime env install [OWNER/]NAME[==VERSION]`: install a published environment from a package index.

OWNER names a configured index (indexes.py); NAME is the distribution on it. pip runs twice so that a
project of the same name on PyPI (or on any index the user's pip reads) can never be installed in its
place (dependency confusion):

1. `pip install --no-deps --force-reinstall NAME==VERSION` with our index as pip's only source: PIP_INDEX_URL, no config
   files (PIP_CONFIG_FILE=/dev/null drops their extra-index-url and find-links; their network settings
   are carried over as variables), no find-links or extra indexes from the environment;
2. its dependencies (the wheel's Requires-Dist, read by a `--dry-run --report` of step 1 before anything is
   installed) through install_guard.py: verifiers and PyPI's `prime` left out, prime's own dependencies
   pinned, from the user's usual indexes plus ours (PIP_EXTRA_INDEX_URL appended to theirs).

The index URL carries the token, so it goes only into the child's environment, never argv, and pip's
output is redacted before it is shown. A failure is one line: pip's most telling one, or that the index
stopped answering.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .build_backend import builds_in_place
from .errors import WorkspaceError
from .indexes import PackageIndex, redact, with_credentials
from .install_guard import changes, install_dependencies, plan_dependencies, snapshot
from .names import module_name
from .pip_failure import pip_failure_reason

# pip settings that only say how to reach a server: kept in step 1, where the config files are not read
NETWORK_SETTINGS = ("cert", "client-cert", "proxy", "trusted-host", "timeout", "default-timeout", "retries")
SOURCE_VARIABLES = ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_INDEX_URL", "PIP_CONFIG_FILE")
_CONFIG_LINE = re.compile(r"^(?P<section>[^.]+)\.(?P<key>[A-Za-z0-9_-]+)='(?P<value>.*)'$")


@dataclass(frozen=True)
class IndexRequest:
    """What `prime env install` was asked for: `owner/my-env==1.2.0` -> ("owner", "my-env", "1.2.0")."""

    owner: str | None
    project: str
    version: str | None

    def __str__(self) -> str:
        return f"{self.owner + '/' if self.owner else ''}{self.project}{'==' + self.version if self.version else ''}"


@dataclass
class IndexInstallResult:
    project: str
    version: str
    index: PackageIndex
    output: str  # pip's, redacted
    skipped: list[str] = field(default_factory=list)  # "skipped verifiers>=0.1: why" lines
    changes: list[str] = field(default_factory=list)  # "added NAME VERSION" / "changed NAME OLD -> NEW" lines


def parse_request(target: str) -> IndexRequest:
    """`[OWNER/]NAME[==VERSION]`, each part checked (WorkspaceError says which is wrong)."""
    from packaging.version import InvalidVersion, Version  # lazy: start-up

    from .names import check_env_name, is_owner  # lazy: already loaded

    text = target.strip()
    version = None
    if "==" in text:
        text, version = (part.strip() for part in text.split("==", 1))
        try:
            Version(version)
        except InvalidVersion:
            raise WorkspaceError(f"{version!r} is not a version (in {target!r}); write e.g. owner/my-env==1.2.0") from None
    owner = None
    if "/" in text:
        owner, text = text.split("/", 1)
        if not is_owner(owner):
            raise WorkspaceError(f"{target!r}: the part before '/' must name a configured package index "
                                 "(OWNER in OWNER/my-env)")
    return IndexRequest(owner, check_env_name(text), version)


def _pip_config() -> dict[str, str]:
    """The settings pip reads from its config files and PIP_* variables, as `section.key` -> value."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    settings = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        if match := _CONFIG_LINE.match(line.strip()):
            settings[f"{match['section']}.{match['key']}"] = match["value"]
    return settings


def _setting(config: dict[str, str], key: str) -> str | None:
    """The value pip uses for `key`: a variable, else the [install] section, else [global]."""
    for section in (":env:", "install", "global"):
        if f"{section}.{key}" in config:
            return config[f"{section}.{key}"]
    return None


def only_index_environment(index_url: str, config: dict[str, str]) -> dict[str, str]:
    """Step 1's environment: `index_url` is the one place pip may look."""
    env = {key: value for key, value in os.environ.items() if key not in SOURCE_VARIABLES}
    for key in NETWORK_SETTINGS:
        variable = "PIP_" + key.upper().replace("-", "_")
        value = _setting(config, key)
        if value is not None and variable not in env:
            env[variable] = value
    env.update({"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": index_url})
    return env


def extra_index_environment(index_url: str, config: dict[str, str]) -> dict[str, str]:
    """Step 2's environment: the user's own indexes, and ours after them."""
    env = dict(os.environ)
    theirs = (_setting(config, "extra-index-url") or "").split()
    env["PIP_EXTRA_INDEX_URL"] = " ".join([*theirs, index_url])
    return env


def _run(arguments: list[str], env: dict[str, str], secrets: list[str]) -> tuple[int, str]:
    """`pip install ARGUMENTS` with `env`: exit code and output, redacted."""
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    return done.returncode, redact((done.stdout + done.stderr).strip(), secrets)


def _failure(output: str, what: str, index: PackageIndex) -> WorkspaceError:
    if not answers(index.simple_url):
        return WorkspaceError(f"index {index.name} ({index.simple_url}) stopped answering while pip installed "
                              f"{what}; is it running?")
    return WorkspaceError(f"pip could not install {what} (index {index.name}): {pip_failure_reason(output)}")


def _pip(arguments: list[str], env: dict[str, str], secrets: list[str], what: str, index: PackageIndex) -> str:
    """pip's output; WorkspaceError of one line when it fails (`what`: what it was installing)."""
    code, output = _run(arguments, env, secrets)
    if code != 0:
        raise _failure(output, what, index)
    return output


def declared_requirements(arguments: list[str], env: dict[str, str], secrets: list[str], what: str,
                          index: PackageIndex) -> list[str]:
    """The Requires-Dist of what `pip install ARGUMENTS` would install (one distribution), nothing installed."""
    with tempfile.TemporaryDirectory(prefix="prime-install-") as folder:  # the report holds URLs: private
        report = Path(folder) / "report.json"
        _pip(["--dry-run", "--report", str(report), *arguments], env, secrets, what, index)
        planned = json.loads(report.read_text()).get("install", [])
    return list(planned[0]["metadata"].get("requires_dist") or []) if planned else []


def answers(url: str) -> bool:
    """Whether a server answers at `url` at all (an HTTP error, 401 included, is an answer)."""
    import urllib.error  # lazy: start-up
    import urllib.request  # lazy: start-up

    try:
        with urllib.request.urlopen(url, timeout=10):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def step_two_build_options(credentials: tuple[str, str] | None) -> list[str]:
    """How step 2 may build a dependency that comes as an sdist.

    pip's isolated build installs the build backend with a child `pip install -i URL --extra-index-url URL`:
    every index URL, ours with its token, would be in that child's argv (readable by anyone in `ps`). With
    credentials, step 2 therefore builds with the setuptools already here (--no-build-isolation; a dependency
    needing another backend then fails with pip's line naming it), or, without a setuptools that can,
    takes wheels only. Without credentials nothing is secret and pip builds as it always does.
    """
    if credentials is None:
        return []
    return ["--no-build-isolation"] if builds_in_place() else ["--only-binary", ":all:"]


def provides_module(project: str, module: str) -> bool:
    """Whether the installed distribution `project` has the top-level module or package `module`."""
    try:
        files = importlib.metadata.distribution(project).files or []
    except importlib.metadata.PackageNotFoundError:
        return False
    return any(file.parts and (file.parts[0] in (module, f"{module}.py") or
                               (file.parts[0].startswith(f"{module}.") and file.suffix in (".so", ".pyd")))
               for file in files)


def choose_version(request: IndexRequest, index: PackageIndex, published: list[str]) -> str:
    """The version asked for, or the newest one on the index."""
    from .index_client import published_as  # lazy: start-up

    where = f"index {index.name} ({index.simple_url})"
    if not published:
        raise WorkspaceError(f"{request.project} is not on {where}; push it with `prime env push`")
    if request.version is None:
        return published[-1]
    if (version := published_as(request.version, published)) is not None:
        return version
    raise WorkspaceError(f"{request.project} {request.version} is not on {where}; it has {', '.join(published)}")


def install_from_index(request: IndexRequest, index: PackageIndex) -> IndexInstallResult:
    from .index_client import published_versions  # lazy: start-up

    version = choose_version(request, index, published_versions(index, request.project))
    credentials = index.credentials()
    secrets = [credentials[1]] if credentials else []
    index_url = with_credentials(index.simple_url, credentials)
    config = _pip_config()
    requirement = f"{request.project}=={version}"
    where = f"index {index.name} ({index.simple_url})"
    # --force-reinstall: the same name and version installed from elsewhere (an editable local copy, another
    # index) would otherwise leave pip "already satisfied", nothing taken from our index.
    # --no-build-isolation always: our index is the only source here, so an isolated build could only fetch
    # its backend from it (and would carry the token in a child's argv, see step_two_build_options).
    step_one = ["--no-deps", "--force-reinstall", "--no-build-isolation", requirement]
    only_ours = only_index_environment(index_url, config)
    plan = plan_dependencies(request.project, declared_requirements(step_one, only_ours, secrets, requirement, index))
    before = snapshot()
    output = _pip(step_one, only_ours, secrets, requirement, index)
    importlib.invalidate_caches()
    module = module_name(request.project)
    if not provides_module(request.project, module):
        raise WorkspaceError(f"{requirement} on {where} does not contain module {module} (prime loads environment "
                             f"{request.project} from module {module}); it is installed but cannot be used")
    what = f"the dependencies of {requirement}"
    step_two = extra_index_environment(index_url, config)
    outcome = install_dependencies(
        plan, lambda arguments: _run([*step_two_build_options(credentials), *arguments], step_two, secrets),
        lambda failed: _failure(failed, what, index))
    importlib.invalidate_caches()
    return IndexInstallResult(request.project, version, index, "\n".join([output, outcome.output]).strip(),
                              outcome.skipped, changes(before, snapshot(), request.project))
