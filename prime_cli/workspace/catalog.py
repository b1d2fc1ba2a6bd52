"""`prime env list` and `prime env info`: what environments exist and what they take."""

from __future__ import annotations

import importlib.metadata as metadata
import inspect
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_cli.runs.visible import visible, visible_data

from .names import check_env_id, dist_name, module_name
from .provenance import describe as describe_provenance
from .provenance import installed_provenance

FRAMEWORKS = {"prime-cli", "verifiers"}


@dataclass
class EnvironmentEntry:
    name: str
    version: str | None = None  # installed version
    local_version: str | None = None  # version in ./environments/<module>/pyproject.toml
    location: str | None = None  # the folder that is used: the local one when it exists
    installed_location: str | None = None  # where the installed module lives
    shadowed: bool = False  # a local folder is used instead of a different installed copy

    @property
    def installed(self) -> bool:
        return self.version is not None

    @property
    def local(self) -> bool:
        return self.local_version is not None

    @property
    def used(self) -> str:
        return "local" if self.local else "installed"


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


LOAD_ENVIRONMENT = re.compile(r"\bload_environment\b")


def _environment_module(dist: metadata.Distribution, name: str) -> Path | None:
    """The file of the module `name` provides if it is an environment (it names `load_environment`),
    found without importing it. Trainer plugins (`prime.trainers` entry points) are not environments."""
    from prime_cli.envs.loader import installed_origin  # lazy: already loaded

    if any(ep.group == "prime.trainers" for ep in dist.entry_points):
        return None
    origin = installed_origin(module_name(name))
    try:
        return origin if origin is not None and LOAD_ENVIRONMENT.search(origin.read_text(encoding="utf-8")) else None
    except (OSError, UnicodeDecodeError):
        return None


def installed_environments() -> dict[str, tuple[str, str | None]]:
    """Installed environments: distributions that depend on prime-cli or verifiers and provide a module
    of their own name with a `load_environment`: name -> (version, folder of that module).

    When several distributions share a name, the first on sys.path wins, as it does for `import`."""
    found: dict[str, tuple[str, str | None]] = {}
    for dist in metadata.distributions():
        name = dist_name(dist.metadata["Name"] or "")
        if not name or name in FRAMEWORKS or name in found:
            continue
        if not FRAMEWORKS & {_requirement_name(r) for r in dist.requires or []}:
            continue
        origin = _environment_module(dist, name)
        if origin is not None:
            folder = origin.parent.parent if origin.name == "__init__.py" else origin.parent
            found[name] = (dist.version, str(folder))
    return found


def local_environments(root: Path | None = None) -> dict[str, tuple[str, str]]:
    """The environment folders under ./environments/ (the loader's rule: prime_cli.envs.loader), name ->
    (version from its pyproject.toml, "?" without one, folder)."""
    from prime_cli.envs.loader import local_environments as local_folders  # lazy: already loaded

    found: dict[str, tuple[str, str]] = {}
    for env in local_folders(root):
        version = "?"
        try:
            version = str(tomllib.loads(env.pyproject.read_text(encoding="utf-8")).get("project", {}).get("version", "?"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
            pass
        found.setdefault(dist_name(env.name), (version, str(env.folder)))
    return found


def list_environments(root: Path | None = None) -> list[EnvironmentEntry]:
    from prime_cli.envs.loader import shadowed_install  # lazy: already loaded

    installed, local = installed_environments(), local_environments(root)
    entries = []
    for name in sorted(set(installed) | set(local)):
        version, location = installed.get(name, (None, None))
        local_version, folder = local.get(name, (None, None))
        shadowed = folder is not None and shadowed_install(module_name(name), root) is not None
        entries.append(EnvironmentEntry(name, version, local_version, folder or location, location, shadowed))
    return entries


@dataclass
class EnvironmentInfo:
    env_id: str
    module_file: str | None
    signature: str
    arguments: list[tuple[str, str, str]]  # name, annotation, default ("" when required)
    doc: str
    env_class: str = ""
    dataset_size: int | None = None
    eval_dataset_size: int | None = None
    dataset_problem: str | None = None  # why the datasets could not be loaded
    reward_functions: list[tuple[str, float]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    eval_defaults: dict[str, Any] = field(default_factory=dict)
    provenance: str | None = None  # how the installed package was pushed (prime env push), one line
    rubric_problem: str | None = None  # why eval, check and train refuse its rubric (no reward function)


def _arguments(factory: Any) -> list[tuple[str, str, str]]:
    rows = []
    for param in inspect.signature(factory).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            rows.append((("*" if param.kind == param.VAR_POSITIONAL else "**") + param.name, "", ""))
            continue
        annotation = "" if param.annotation is param.empty else (
            param.annotation if isinstance(param.annotation, str) else getattr(param.annotation, "__name__", str(param.annotation)))
        default = "" if param.default is param.empty else repr(param.default)
        if len(default) > 80:
            default = default[:77] + "..."
        rows.append((param.name, annotation, default))
    return rows


def _eval_defaults(module: Any, env_id: str, root: Path | None) -> dict[str, Any]:
    from prime_cli.envs.loader import find_local_environment  # lazy: already loaded

    origin = Path(getattr(module, "__file__", "") or ".").resolve()
    local = find_local_environment(env_id, root)
    candidates = ([local.pyproject] if local is not None else []) + [
        origin.parent / "pyproject.toml", origin.parent.parent / "pyproject.toml"]
    if origin.parent.parent.name == "src":  # src/<module>/__init__.py: the project is above src/
        candidates.append(origin.parent.parent.parent / "pyproject.toml")
    for candidate in candidates:
        if candidate.is_file():
            tool = tomllib.loads(candidate.read_text(encoding="utf-8")).get("tool", {})
            return dict(tool.get("prime", {}).get("eval") or tool.get("verifiers", {}).get("eval") or {})
    return {}


def _config_fields(config: Any) -> list[tuple[str, str, str]]:
    """A pydantic config's fields as (name, annotation, default) rows (the `-a` arguments of a v1 taskset)."""
    rows = []
    for name, spec in config.model_fields.items():
        if name == "id":  # verifiers' CLI picks the taskset by it; prime by the environment id
            continue
        annotation = getattr(spec.annotation, "__name__", None) or str(spec.annotation).replace("typing.", "")
        default = "" if spec.is_required() else repr(spec.get_default(call_default_factory=True))
        rows.append((name, annotation, default))
    return rows


def environment_info(env_id: str, env_args: dict[str, Any] | None = None, root: Path | None = None) -> EnvironmentInfo:
    """Load the environment and describe it, its texts as shown (control characters escaped: they come from
    the environment's code, its pyproject and its data). Dataset problems (e.g. missing data) are reported,
    not raised."""
    return _shown(_environment_info(env_id, env_args, root))


def _shown(info: EnvironmentInfo) -> EnvironmentInfo:
    return EnvironmentInfo(
        visible(info.env_id), None if info.module_file is None else visible(info.module_file), visible(info.signature),
        [(visible(name), visible(annotation), visible(default)) for name, annotation, default in info.arguments],
        visible(info.doc, multiline=True), visible(info.env_class), info.dataset_size, info.eval_dataset_size,
        None if info.dataset_problem is None else visible(info.dataset_problem, multiline=True),
        [(visible(name), weight) for name, weight in info.reward_functions], [visible(t) for t in info.tools],
        visible_data(info.eval_defaults), None if info.provenance is None else visible(info.provenance),
        None if info.rubric_problem is None else visible(info.rubric_problem))


def _environment_info(env_id: str, env_args: dict[str, Any] | None, root: Path | None) -> EnvironmentInfo:
    from prime_cli.envs.errors import UserInputError  # lazy: already loaded
    from prime_cli.envs.load_errors import (  # lazy: already loaded
        EnvironmentCodeError,
        empty_rubric,
    )
    from prime_cli.envs.loader import (  # lazy: already loaded
        build_environment,
        import_environment_module,
    )

    env_id = check_env_id(env_id)
    module = import_environment_module(env_id, root)
    factory = getattr(module, "load_environment", None)
    info = EnvironmentInfo(env_id, getattr(module, "__file__", None), "", [], "")
    if callable(factory):
        info.signature = f"load_environment{inspect.signature(factory)}"
        info.arguments = _arguments(factory)
        info.doc = inspect.getdoc(factory) or ""
    else:  # a verifiers v1 taskset: its config's fields are the arguments
        from prime_cli.envs.v1.loading import exported_tasksets  # lazy: start-up

        for taskset in exported_tasksets(module)[:1]:
            config = taskset.config_type()
            info.signature = f"{taskset.__name__}({config.__name__})"
            info.arguments = _config_fields(config)
            info.doc = inspect.getdoc(taskset) or inspect.getdoc(module) or ""
    info.eval_defaults = _eval_defaults(module, env_id, root)
    pushed = installed_provenance(module.__name__, getattr(module, "__file__", None))
    if pushed is not None:
        info.provenance = f"{pushed[0]} {pushed[1]}: {describe_provenance(pushed[2])}"
    try:
        env = build_environment(env_id, env_args or {})
    except EnvironmentCodeError as exc:  # an environment prime cannot run is one line, exit 2; an error its
        if exc.kind != "raised":  # code raised (maybe for these arguments or missing data) is described
            raise
        info.dataset_problem = exc.short
        return info
    except Exception as exc:  # missing data, bad arguments: the description so far is still useful
        info.dataset_problem = str(exc) if isinstance(exc, UserInputError) else f"{type(exc).__name__}: {exc}"
        return info
    info.env_class = type(env).__name__
    names = env.rubric.get_reward_func_names()
    weights = env.rubric.get_reward_weights() if hasattr(env.rubric, "get_reward_weights") else [1.0] * len(names)
    info.reward_functions = list(zip(names, weights, strict=False))
    refusal = empty_rubric(env_id, env)
    info.rubric_problem = None if refusal is None else str(refusal)
    info.tools = [tool["function"]["name"] for tool in env.oai_tools or []]
    try:
        info.dataset_size = len(env.dataset) if env.dataset is not None else None
        info.eval_dataset_size = len(env.eval_dataset) if env.eval_dataset is not None else None
    except Exception as exc:
        info.dataset_problem = str(exc) if isinstance(exc, UserInputError) else f"{type(exc).__name__}: {exc}"
    return info
