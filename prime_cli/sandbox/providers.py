"""Which provider runs a sandbox: the user's choice first, then the environment's, then bwrap.

Precedence: `use_provider(NAME)` (what `prime eval run --sandbox NAME` or a config's `sandbox` key
sets), then the `PRIME_SANDBOX` environment variable (reaches child processes such as the trainer's
orchestrator), then the provider the environment asks for, then `bwrap` on Linux. `none` is only
ever used when named. A provider that cannot run here raises `SandboxUnavailable` with one line
naming what to install; nothing falls back to another provider silently.
"""

from __future__ import annotations

import importlib
import os

from .base import SandboxProvider
from .spec import SandboxUnavailable

ENV_VAR = "PRIME_SANDBOX"
DEFAULT = "bwrap"
PROVIDERS = {  # name -> "module:class", imported on first use
    "bwrap": "prime_cli.sandbox.bwrap:BwrapProvider",
    "podman": "prime_cli.sandbox.containers:PodmanProvider",
    "docker": "prime_cli.sandbox.containers:DockerProvider",
    "none": "prime_cli.sandbox.unsandboxed:UnsandboxedProvider",
}
NAMES = tuple(PROVIDERS)

_override: str | None = None
_instances: dict[str, SandboxProvider] = {}


def check_name(name: str) -> str:
    if name not in PROVIDERS:
        raise SandboxUnavailable(f"unknown sandbox provider {name!r}: pick one of {', '.join(NAMES)}")
    return name


def use_provider(name: str | None) -> None:
    """The user's choice for every sandbox this process starts (None: back to the defaults)."""
    global _override
    _override = None if name is None else check_name(name)


def chosen_name(requested: str | None = None) -> str:
    """The provider a sandbox asked for as `requested` by its environment will actually get."""
    name = _override or os.environ.get(ENV_VAR) or requested or DEFAULT
    return check_name(name)


def get_provider(name: str) -> SandboxProvider:
    check_name(name)
    if name not in _instances:
        module, cls = PROVIDERS[name].split(":")
        _instances[name] = getattr(importlib.import_module(module), cls)()
    return _instances[name]


def provider_for(requested: str | None = None) -> SandboxProvider:
    """The provider to use, or `SandboxUnavailable` naming what to install."""
    provider = get_provider(chosen_name(requested))
    reason = provider.unavailable_reason()
    if reason is not None:
        raise SandboxUnavailable(reason)
    return provider
