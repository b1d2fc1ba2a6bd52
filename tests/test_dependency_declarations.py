"""Each package declares what its code imports, and imports what it declares.

A third-party import in prime_cli/, in the trainer plugin or in an example environment (lazy imports
inside functions included) must be a requirement of that package's pyproject.toml (its dependencies or
one of its extras; `dev` holds test tools and does not count). A requirement nothing imports must say
why it is there (SOFT and NOT_IMPORTED below). Parsed with ast: no package is imported.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# (folder of the pyproject.toml, folder of the code relative to it or "" for the top-level modules)
PACKAGES = [(REPO, "prime_cli"), (REPO / "plugins" / "prime-lora", "prime_lora"),
            *((p.parent, "") for p in sorted((REPO / "environments").glob("*/pyproject.toml")))]

# imported where present, never required: the code runs on without them
SOFT = {
    "prime-cli": {
        "huggingface_hub": "train/preflight.py checks the HF cache when the trainer plugin brought it",
        "datasets": "envs/example_datasets.py reads the HF cache with it when an environment brought it (verifiers "
                    "environments do: `prime env install` adds it in verifiers' place), else local files only",
        "math_verify": "envs/rubrics/math_rubric.py: MathRubric is refused in one line without it; the environment "
                       "declares it (`prime env install` adds it in verifiers' place)",
        "tokenizers": "records/training_run.py decodes token ids when installed, else shows counts",
    },
}
# declared and never imported by the package's own code
NOT_IMPORTED = {
    "prime-cli": {
        "gguf": "transformers needs it to load the embedded model's GGUF (serve/convert.py)",
        "accelerate": "transformers needs it to load a GGUF file (serve/convert.py)",
        "build": "`prime env push` runs it as `python -m build` (workspace/push.py)",
        "wandb": "an install alias (`pip install 'prime-cli[wandb]'`); prime-lora imports and declares it",
    },
    "math-python": {"sympy": "the model's python tool code imports it (the prompt says it is available)",
                    "numpy": "the model's python tool code may import it (PythonEnv checks it in the sandbox)"},
}
EXCLUDED_FOLDERS = {"build", "dist", "tests", "__pycache__"}


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(folder: Path) -> set[str]:
    meta = project(folder)
    requirements = list(meta.get("dependencies", []))
    for extra, items in meta.get("optional-dependencies", {}).items():
        if extra != "dev":
            requirements += items
    return {normalise(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r.strip()).group()) for r in requirements}


def source_files(folder: Path, code: str) -> list[Path]:
    root = folder / code
    return [p for p in root.rglob("*.py")
            if not EXCLUDED_FOLDERS & set(p.relative_to(folder).parts[:-1])
            and not any(part.endswith(".egg-info") for part in p.parts)]


def imported(files: list[Path]) -> dict[str, set[str]]:
    """Top-level module name -> the files importing it, for every absolute import."""
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return found


MODULE_DISTRIBUTIONS = importlib.metadata.packages_distributions()


def distributions(module: str) -> set[str]:
    """The distributions that install `module` here, and its own name as one (for what is not installed)."""
    return {normalise(d) for d in MODULE_DISTRIBUTIONS.get(module, [])} | {normalise(module)}


def third_party(folder: Path, code: str) -> dict[str, set[str]]:
    files = source_files(folder, code)
    own = {p.relative_to(folder).parts[0].removesuffix(".py") for p in files}
    return {module: found for module, found in imported(files).items()
            if module not in sys.stdlib_module_names and module not in own and module != "__future__"}


@pytest.mark.parametrize(("folder", "code"), PACKAGES, ids=[str(f.relative_to(REPO)) or "." for f, _ in PACKAGES])
def test_every_import_is_declared_and_every_declaration_imported(folder, code):
    name = normalise(project(folder)["name"])
    requirements = declared(folder)
    modules = third_party(folder, code)
    soft = SOFT.get(name, {})
    undeclared = {m: sorted(files) for m, files in modules.items()
                  if m not in soft and not distributions(m) & requirements}
    assert not undeclared, f"{name} imports what its pyproject.toml does not declare: {undeclared}"
    provided = set().union(*(distributions(m) for m in modules)) if modules else set()
    unused = requirements - provided - {normalise(d) for d in NOT_IMPORTED.get(name, {})}
    assert not unused, f"{name} declares what its code never imports: {sorted(unused)}"


def test_the_exceptions_are_still_needed():
    """An entry in SOFT or NOT_IMPORTED that the code has outgrown is removed, not kept 'just in case'."""
    for folder, code in PACKAGES:
        name = normalise(project(folder)["name"])
        modules = third_party(folder, code)
        requirements = declared(folder)
        for module in SOFT.get(name, {}):
            assert module in modules, f"{name}: SOFT lists {module}, which is no longer imported"
            assert not distributions(module) & requirements, f"{name}: SOFT lists {module}, which is declared"
        for dist in NOT_IMPORTED.get(name, {}):
            assert normalise(dist) in requirements, f"{name}: NOT_IMPORTED lists {dist}, which is not declared"
