"""Trainer plugins: found through the `prime.trainers` entry-point group, loaded by name.

`list_trainers()` reads only distribution metadata (it never imports a plugin); `load_trainer()`
imports the chosen one and checks that it speaks this plugin API version (prime_cli/train/contract.py).
"""

from __future__ import annotations

import difflib
from importlib.metadata import entry_points
from typing import Any, NamedTuple

from .contract import API_VERSION, MEMBERS, TrainerPlugin
from .errors import TrainConfigError

GROUP = "prime.trainers"
INSTALL_HINT = ("install the LoRA trainer with `pip install -e plugins/prime-lora` from the prime repository "
                "(or run `make setup` there)")


class TrainerInfo(NamedTuple):
    name: str
    package: str
    version: str
    value: str  # "module:attribute"


def _entry_points() -> list[Any]:
    seen: set[tuple[str, str]] = set()
    found = []
    for ep in entry_points(group=GROUP):
        key = (ep.name, ep.value)
        if key not in seen:  # one distribution visible twice on sys.path
            seen.add(key)
            found.append(ep)
    return found


def _info(ep: Any) -> TrainerInfo:
    dist = getattr(ep, "dist", None)
    package = dist.metadata["Name"] if dist is not None and dist.metadata["Name"] else "?"
    version = dist.version if dist is not None else "?"
    return TrainerInfo(ep.name, package, version, ep.value)


def list_trainers() -> list[TrainerInfo]:
    """Installed trainers, sorted by name, without importing them."""
    return sorted((_info(ep) for ep in _entry_points()), key=lambda t: (t.name, t.package))


def _choose(name: str | None) -> Any:
    eps = sorted(_entry_points(), key=lambda ep: ep.name)
    if not eps:
        raise TrainConfigError(f"no trainer plugin is installed: {INSTALL_HINT}")
    names = sorted({ep.name for ep in eps})
    if name is None:
        if len(names) > 1:
            raise TrainConfigError(f"several trainers are installed ({', '.join(names)}): pick one with --trainer NAME")
        name = names[0]
    chosen = [ep for ep in eps if ep.name == name]
    if not chosen:
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TrainConfigError(f"--trainer: no trainer named {name!r} (installed: {', '.join(names)}){hint}")
    if len(chosen) > 1:
        packages = ", ".join(_info(ep).package for ep in chosen)
        raise TrainConfigError(f"trainer {name!r} is provided by several packages ({packages}): uninstall all but one")
    return chosen[0]


def load_trainer(name: str | None = None) -> TrainerPlugin:
    """The plugin object of trainer `name` (the only installed one when None)."""
    ep = _choose(name)
    info = _info(ep)
    label = f"trainer {info.name!r} ({info.package} {info.version})"
    try:
        plugin = ep.load()
    except Exception as exc:
        raise TrainConfigError(f"{label} failed to import {info.value}: {type(exc).__name__}: {exc}") from None
    if isinstance(plugin, type):
        plugin = plugin()
    version = getattr(plugin, "api_version", None)  # read before the contract: an older one may lack members
    if version != API_VERSION:
        raise TrainConfigError(_version_refusal(info, version))
    if not isinstance(plugin, TrainerPlugin):  # a member of the contract is missing
        missing = [attr for attr in MEMBERS if not hasattr(plugin, attr)]
        raise TrainConfigError(f"{label} is not a valid trainer plugin (it has no {', '.join(missing)})")
    return plugin


def _version_refusal(info: TrainerInfo, version: object) -> str:
    plugin = f"trainer plugin {info.name!r} ({info.package} {info.version})"
    speaks = f"speaks plugin API {version}" if isinstance(version, int) else "declares no plugin API version"
    if isinstance(version, int) and version > API_VERSION:
        return (f"{plugin} {speaks}; prime needs {API_VERSION}: upgrade prime, or install a {info.package} "
                f"release made for plugin API {API_VERSION}")
    upgrade = INSTALL_HINT.removeprefix("install the LoRA trainer with ") if info.package == "prime-lora" else (
        f"`pip install -U {info.package}`")
    return f"{plugin} {speaks}; prime needs {API_VERSION}: upgrade it with {upgrade}"
