"""Why an environment did not load, in one line naming the cause and the fix: the one formatter every
command that loads an environment goes through (loader.py raises what it builds; the CLI prints it, and
with -v the traceback of the original error above it).

The cases a user meets when bringing an environment from elsewhere get their own line:
- a verifiers module or name prime does not provide (its `.name` starts with "verifiers");
- an object of a real `verifiers` package (a class from it, or a verifiers module that is not prime's): that
  package was imported before prime could resolve `import verifiers` to its own API;
- a third-party module that is not installed: `prime env install <env>` installs declared dependencies;
- `load_environment()` returning something that is not an environment;
- a rubric with no reward function (in the environment, an EnvGroup child, or every rubric of a RubricGroup).
Anything else is the error's type and first line, and where in the environment's code it was raised.
"""

from __future__ import annotations

import sys
import traceback
import types
from pathlib import Path
from typing import Any

from .errors import EnvironmentLoadError

DOCS = "docs/environments.md"
MAX_DETAIL = 240
HOW_PRIME_RUNS_VERIFIERS = (
    "prime runs verifiers environments by resolving `import verifiers` to its own API, so here the real "
    "verifiers was imported before prime could (by a plugin, a .pth file or sitecustomize, or a module imported "
    "earlier): import verifiers only inside the environment, or uninstall it from this Python (prime needs none)")


class EnvironmentCodeError(EnvironmentLoadError):
    """The environment's module or its `load_environment()` raised, or returned no environment. The message
    is one line; `__cause__` is the original error (the CLI prints its traceback with -v)."""

    def __init__(self, message: str, kind: str, short: str | None = None, where: str = "",
                 traceback_helps: bool = True) -> None:
        super().__init__(message)
        # raised (its code raised; maybe only for these arguments or this machine's data), missing_module,
        # not_provided (a verifiers piece), foreign (a real verifiers object), not_environment, empty_rubric
        self.kind = kind
        self.short = short or message.split(": ", 1)[-1]  # without the environment's id: `KeyError: 'split'`
        self.where = where  # ` (my_env.py, line 12)` where its code raised, when known
        self.traceback_helps = traceback_helps  # whether -v would show the user more


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().split("\n") if line.strip()]  # a lone \r is no break
    text = lines[0] if lines else ""
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 3] + "..."


def _is_verifiers_name(name: Any) -> bool:
    return isinstance(name, str) and (name == "verifiers" or name.startswith("verifiers."))


def _is_alias(module: Any) -> bool:
    from .verifiers_alias import is_alias  # lazy: already loaded

    return is_alias(module)


def _class_file(cls: type) -> str | None:
    """The file `cls` was defined in, from its own functions (its module may be gone from sys.modules:
    prime's verifiers alias drops a real verifiers imported before it)."""
    for klass in cls.__mro__:
        for value in vars(klass).values():
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            if code is not None and code.co_filename:
                return code.co_filename
    return getattr(sys.modules.get(cls.__module__), "__file__", None)


def _real_verifiers(module: Any, origin: str | None = None) -> str | None:
    """`verifiers 0.1.9 from PATH` for a module of a real verifiers package (not prime's), else None."""
    if origin is None:
        if not isinstance(module, types.ModuleType) or not _is_verifiers_name(module.__name__) or _is_alias(module):
            return None
        origin = getattr(module, "__file__", None)
    where = ""
    if origin:
        path = Path(origin)
        root = path.parent
        while root.name != "verifiers" and root != root.parent:
            root = root.parent
        where = f" from {root if root.name == 'verifiers' else path.parent}"
    version = ""
    try:
        import importlib.metadata  # lazy: start-up

        version = f" {importlib.metadata.version('verifiers')}"
    except Exception:  # noqa: BLE001 - no distribution (a bare folder on the path): no version to show
        pass
    return f"verifiers{version}{where}"


def _where_raised(exc: BaseException, folder: Path | None) -> str:
    """` (my_env.py, line 12)`: the innermost frame in the environment's folder, else nothing."""
    if folder is None:
        return ""
    try:
        folder = folder.resolve()
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if f.filename and Path(f.filename).resolve().is_relative_to(folder)]
    except (OSError, ValueError):
        return ""
    return f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""


def code_failure(env_id: str, exc: BaseException, stage: str, folder: Path | None = None) -> EnvironmentCodeError:
    """The error to raise (`from exc`) for `exc`, raised by the environment's own code while `stage`
    ("importing its module" or "load_environment()") ran; `folder` holds that code."""
    name = getattr(exc, "name", None)
    where = _where_raised(exc, folder)
    if isinstance(exc, (ImportError, AttributeError)):
        obj = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
        real = _real_verifiers(obj)
        if real is not None:
            return EnvironmentCodeError(
                f"{env_id}: {stage} asked the real verifiers package ({real}, not prime's) for {name!r}{where}, "
                f"which it does not have; {HOW_PRIME_RUNS_VERIFIERS}", kind="foreign")
        if isinstance(obj, types.ModuleType) and _is_alias(obj) and isinstance(name, str):
            name = f"{obj.__name__}.{name}"
        if _is_verifiers_name(name) and name.startswith("verifiers.v1"):
            return EnvironmentCodeError(f"{env_id}: {exc}{where}; {DOCS} lists what prime runs", kind="not_provided")
        if _is_verifiers_name(name):
            return EnvironmentCodeError(
                f"{env_id}: the environment uses {name}{where}, which prime does not provide (prime runs verifiers' "
                f"classic API as its own; {DOCS} lists what it provides): port that part to that API",
                kind="not_provided")
    if isinstance(exc, ModuleNotFoundError) and isinstance(name, str) and name:
        top = name.split(".")[0]
        return EnvironmentCodeError(
            f"{env_id}: the environment imports {name!r}{where}, which is not installed here; `prime env install "
            f"{env_id}` installs the environment's declared dependencies (add the package that provides {top!r} "
            "to its pyproject.toml if it is not declared)", kind="missing_module")
    detail = _first_line(exc)
    short = f"{type(exc).__name__}{': ' + detail if detail else ''}"
    if _is_hub_download_failure(exc):
        return EnvironmentCodeError(
            f"{env_id}: {stage} needed a download from the Hugging Face hub that failed here ({short}){where}; "
            "put the files in the local Hugging Face cache (or pass the environment a local copy, if it takes one), "
            "or run where the hub can be reached", kind="hub_download")
    return EnvironmentCodeError(f"{env_id}: {stage} raised {short}{where}; fix the environment's code",
                                kind="raised", short=short, where=where)


# what huggingface_hub and datasets raise when a file is neither reachable nor cached
HUB_FAILURES = frozenset({"LocalEntryNotFoundError", "OfflineModeIsEnabled", "DatasetNotFoundError",
                          "RepositoryNotFoundError", "HfHubHTTPError", "EntryNotFoundError"})


def _is_hub_download_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(5):  # the error and its causes: datasets wraps huggingface_hub's
        if seen is None:
            return False
        module = type(seen).__module__.split(".")[0]
        if any(cls.__name__ in HUB_FAILURES for cls in type(seen).__mro__) and module in ("huggingface_hub", "datasets"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def not_an_environment(env_id: str, module: str, value: Any) -> EnvironmentCodeError:
    """`load_environment()` returned `value`, which is no prime Environment."""
    cls = type(value)
    where = f"{module}.load_environment()"
    if _is_verifiers_name(cls.__module__):
        real = _real_verifiers(None, _class_file(cls) or "")
        return EnvironmentCodeError(
            f"{env_id}: {where} returned a {cls.__name__} of the real verifiers package ({real}), not a prime "
            f"environment; {HOW_PRIME_RUNS_VERIFIERS}", kind="foreign", traceback_helps=False)
    if value is None:
        return EnvironmentCodeError(f"{env_id}: {where} returned None, not a prime environment; end it with "
                                    "`return vf.SingleTurnEnv(...)` (or another vf.Environment)", kind="not_environment",
                                    traceback_helps=False)
    shown = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    return EnvironmentCodeError(
        f"{env_id}: {where} returned {shown}, not a prime environment; return a vf.Environment, "
        "e.g. vf.SingleTurnEnv(dataset=..., rubric=vf.Rubric(funcs=[...]))", kind="not_environment",
        traceback_helps=False)


def _scores_itself(rubric: Any) -> bool:
    """A rubric class that overrides scoring: it may score without registered reward functions."""
    from .rubrics import Rubric, RubricGroup  # lazy: already loaded

    base = RubricGroup if isinstance(rubric, RubricGroup) else Rubric
    return any(getattr(type(rubric), method, None) is not getattr(base, method, None)
               for method in ("compute_scores", "score_group", "score_rollout"))


def _has_reward_functions(rubric: Any) -> bool:
    from .rubrics import Rubric, RubricGroup  # lazy: already loaded

    if not isinstance(rubric, Rubric) or _scores_itself(rubric):
        return True
    if isinstance(rubric, RubricGroup):
        return any(_has_reward_functions(child) for child in rubric.rubrics)
    return bool(rubric.get_reward_funcs())


def empty_rubric(env_id: str, env: Any) -> EnvironmentCodeError | None:
    """The refusal of an environment (or EnvGroup child) whose rubric has no reward function, else None."""
    from .env_group import EnvGroup  # lazy: already loaded

    fix = "add one: vf.Rubric(funcs=[my_reward]) or rubric.add_reward_func(my_reward)"
    if isinstance(env, EnvGroup):
        for name, child in env.env_map.items():
            if isinstance(child, EnvGroup):
                if (problem := empty_rubric(f"{env_id} (child {name!r})", child)) is not None:
                    return problem
            elif not _has_reward_functions(child.rubric):
                return EnvironmentCodeError(
                    f"{env_id}: the EnvGroup child {name!r} has a rubric with no reward function, so each of its "
                    f"rollouts would score 0; {fix}", kind="empty_rubric", traceback_helps=False)
        return None
    if _has_reward_functions(env.rubric):
        return None
    return EnvironmentCodeError(f"{env_id}: the rubric has no reward function, so every rollout would score 0; "
                                f"{fix}", kind="empty_rubric", traceback_helps=False)
