"""`import verifiers` inside prime: verifiers' classic API, served by prime's own environment API.

An environment written for verifiers (`import verifiers as vf`, `from verifiers.types import Messages`,
`from verifiers.rubrics.math_rubric import MathRubric` ...) runs as its repository has it: `install()`
puts a finder first on `sys.meta_path` that answers every `verifiers` and `verifiers.<module>` import in
this process with a module made here, whose names are `prime_cli.envs`'s public ones (`verifiers.v1` and
its modules: `prime_cli.envs.v1`'s). Each module of
verifiers' classic layout that environments import from (MODULES) gets the whole public namespace, so a
name imported from a neighbouring module of verifiers still resolves. A module or a name prime does not
provide (verifiers' experimental and integration environments, v1 harnesses and runtimes) raises an ImportError
or AttributeError whose message says so and whose `name` starts with "verifiers".

The finder lives only in the process that loads an environment through prime (loader.py calls
`install()`); an installed verifiers package is neither changed nor imported, so `vf-eval` outside prime
sees its own.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

ROOT = "verifiers"
# verifiers' classic modules that environments import names from (packages end with "/")
MODULES = frozenset({
    "verifiers", "verifiers.types", "verifiers.errors", "verifiers.decorators",
    "verifiers.envs", "verifiers.envs.environment", "verifiers.envs.multiturn_env", "verifiers.envs.singleturn_env",
    "verifiers.envs.tool_env", "verifiers.envs.stateful_tool_env", "verifiers.envs.env_group",
    "verifiers.envs.sandbox_env", "verifiers.envs.python_env",
    "verifiers.parsers", "verifiers.parsers.parser", "verifiers.parsers.xml_parser", "verifiers.parsers.think_parser",
    "verifiers.parsers.maybe_think_parser",
    "verifiers.rubrics", "verifiers.rubrics.rubric", "verifiers.rubrics.judge_rubric", "verifiers.rubrics.math_rubric",
    "verifiers.rubrics.rubric_group", "verifiers.rubrics.tool_rubric",
    "verifiers.utils", "verifiers.utils.data_utils", "verifiers.utils.async_utils", "verifiers.utils.tool_utils",
    "verifiers.utils.message_utils", "verifiers.utils.env_utils",
})
PACKAGES = frozenset({"verifiers", "verifiers.envs", "verifiers.parsers", "verifiers.rubrics", "verifiers.utils"})
DOCS = "docs/environments.md (\"Environments written for verifiers\")"


class NotProvidedByPrime(ImportError):
    """A verifiers module that prime's verifiers API does not have."""


def not_provided_message(what: str) -> str:
    if what == "verifiers.v1" or what.startswith("verifiers.v1."):
        return (f"prime does not provide {what}: prime runs verifiers' v1 tasksets (Taskset, Task, TaskData, "
                f"Toolset, @vf.reward/metric/stop/tool) on its own chat and tool loop, not verifiers' bundled "
                f"tasksets, harnesses or runtimes; see {DOCS}")
    return (f"prime does not provide {what}: prime runs verifiers' classic API (Environment, SingleTurnEnv, "
            f"MultiTurnEnv, ToolEnv, SandboxEnv, Rubric, JudgeRubric, MathRubric ...), not verifiers' experimental "
            f"or integration environments; see {DOCS}")


# prime_cli.envs, handed over by its __init__ once every name is in it (serve_api): the alias serves the
# whole API, whose load_environment installs the alias, so the API comes to this module rather than the
# module importing the API (that import would close a cycle through loader.py)
_api: types.ModuleType | None = None


def serve_api(api: types.ModuleType) -> None:
    global _api
    _api = api


def _public_namespace() -> dict[str, Any]:
    api = _api
    if api is None:
        raise ImportError("the verifiers alias serves prime_cli.envs, which has not finished importing")
    names = {name: getattr(api, name) for name in api.__all__}
    names["RewardFunc"] = api.rubrics.rubric.RewardFunc
    names["ChatMessages"] = api.Messages
    return names


class _AliasModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        error = AttributeError(not_provided_message(f"{self.__name__}.{name}"))
        error.name = f"{self.__name__}.{name}"
        raise error


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _AliasModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__.update(_public_namespace())
        module.__dict__["__prime_alias__"] = True
        if module.__name__ in PACKAGES:
            module.__path__ = []  # a package, so that its submodules import through the finder


V1 = "verifiers.v1"
# verifiers' v1 modules that tasksets import names from; each gets prime_cli.envs.v1's whole namespace
V1_MODULES = frozenset({
    V1, f"{V1}.types", f"{V1}.task", f"{V1}.taskset", f"{V1}.trace", f"{V1}.state", f"{V1}.errors", f"{V1}.mcp",
    f"{V1}.utils", f"{V1}.utils.decorators", f"{V1}.utils.image", f"{V1}.configs", f"{V1}.configs.task",
    f"{V1}.configs.taskset", f"{V1}.runtimes", f"{V1}.tasksets", f"{V1}.tasksets.harbor",
})
V1_PACKAGES = frozenset({V1, f"{V1}.utils", f"{V1}.configs", f"{V1}.runtimes", f"{V1}.tasksets", f"{V1}.tasksets.harbor"})


class _V1AliasModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        from . import v1  # lazy: start-up

        error = AttributeError(v1.not_provided(name))
        error.name = f"{self.__name__}.{name}"
        raise error


class _V1AliasLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _V1AliasModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        from . import v1  # lazy: start-up
        from .v1.images import image_data_url  # lazy: start-up

        module.__dict__.update({name: getattr(v1, name) for name in v1.__all__}, image_data_url=image_data_url)
        module.__dict__["__prime_alias__"] = True
        if module.__name__ in V1_PACKAGES:
            module.__path__ = []


class VerifiersAliasFinder(importlib.abc.MetaPathFinder):
    loader = _AliasLoader()
    v1_loader = _V1AliasLoader()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != ROOT and not fullname.startswith(ROOT + "."):
            return None
        if fullname in V1_MODULES:
            return importlib.machinery.ModuleSpec(fullname, self.v1_loader, is_package=fullname in V1_PACKAGES)
        if fullname not in MODULES:
            raise NotProvidedByPrime(not_provided_message(fullname), name=fullname)
        return importlib.machinery.ModuleSpec(fullname, self.loader, is_package=fullname in PACKAGES)


def is_alias(module: Any) -> bool:
    return bool(getattr(module, "__prime_alias__", False))


def install() -> None:
    """Make `import verifiers` mean prime's API in this process (idempotent). Modules of a real verifiers
    package imported earlier are dropped from `sys.modules` (objects made from them keep working)."""
    if not any(isinstance(finder, VerifiersAliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, VerifiersAliasFinder())
    for name in [n for n in sys.modules if n == ROOT or n.startswith(ROOT + ".")]:
        if not is_alias(sys.modules[name]):
            del sys.modules[name]
