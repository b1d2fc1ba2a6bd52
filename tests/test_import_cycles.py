"""No import cycles among prime's modules, counting the imports inside functions; each of those says why.

A function-local import runs the first time its function is called, so it closes a cycle as surely as
one at the top of a file; it only moves the failure to a later, rarer moment. The graph is read from
the source (tests/support/import_graph.py): an import under `if TYPE_CHECKING:` never runs and is left out.
So that a reader can tell a lazy import from a hidden cycle, each function-local import in prime_cli ends
with `# lazy: REASON`, REASON one of LAZY_REASONS.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.support.import_graph import function_local_imports, import_cycles, import_sites

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"prime_cli": REPO / "prime_cli", "prime_lora": REPO / "plugins" / "prime-lora" / "prime_lora"}


def test_prime_has_no_import_cycle():
    cycles = import_cycles(import_sites(PACKAGES))
    assert cycles == [], (
        "import cycles (a function-local import counts: it only delays the failure); move what both sides "
        "need into the module it belongs to, below both:\n" + "\n".join(cycles))


LAZY_REASONS = {
    "start-up": "it loads modules this one does not, kept out of the import of this module (and of `prime --help`)",
    "heavy": "it brings a slow library (openai, litellm, textual, pandas, pydantic, rich, twine)",
    "optional dependency": "a package that may not be installed (torch, vllm, transformers, pyarrow, datasets ...)",
    "already loaded": "this module's own imports load it already: local for reading only, it may move to the top",
}
LAZY_MARK = re.compile(r"# lazy: (" + "|".join(map(re.escape, LAZY_REASONS)) + r")\b")


def test_every_function_local_import_says_why():
    unmarked = []
    for path in sorted(PACKAGES["prime_cli"].rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for node in function_local_imports(path):
            if not LAZY_MARK.search(lines[node.lineno - 1]):
                unmarked.append(f"{path.relative_to(REPO)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    reasons = "\n".join(f"  # lazy: {reason}  ({meaning})" for reason, meaning in LAZY_REASONS.items())
    assert unmarked == [], (
        "a function-local import without the reason it is not at the top; end its first line with one of\n"
        f"{reasons}\n(or move it to the top):\n" + "\n".join(unmarked))


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return root


@pytest.mark.parametrize(("files", "cycle"), [
    # a function-local import closes a cycle
    ({"a.py": "from . import b\n", "b.py": "def later():\n    from .a import thing\n    return thing\n"},
     "pkg.a -> pkg.b -> pkg.a"),
    # a cycle of three is named in order, through `import pkg.b`, `from pkg import c` and a relative import
    ({"a.py": "import pkg.b\n", "b.py": "from pkg import c\n", "c.py": "from .a import x\n"},
     "pkg.a -> pkg.b -> pkg.c -> pkg.a"),
], ids=["function-local", "three"])
def test_a_cycle_is_found_and_named(tmp_path, files, cycle):
    package = write_package(tmp_path / "pkg", {"__init__.py": "", **files})
    assert import_cycles(import_sites({"pkg": package})) == [cycle]


def test_type_checking_imports_do_not_count_and_a_package_init_is_reached_through_its_imports(tmp_path):
    package = write_package(tmp_path / "pkg", {
        "__init__.py": "from .api import serve\n",
        "api.py": "import typing\nif typing.TYPE_CHECKING:\n    from .deep.inner import Kind\ndef serve(): ...\n",
        "deep/__init__.py": "",
        "deep/inner.py": "import pkg.api\n",
        "client.py": "def use():\n    import pkg\n",
        "helper.py": "import pkg.client\n",
    })
    cycles = import_cycles(import_sites({"pkg": package}))
    assert cycles == []
    # a module that imports the package facade, which imports it back, is a cycle
    (package / "api.py").write_text("def serve():\n    import pkg\n", encoding="utf-8")
    assert import_cycles(import_sites({"pkg": package})) == ["pkg -> pkg.api -> pkg"]
