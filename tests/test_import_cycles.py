"""No import cycles among prime's modules, counting the imports inside functions.

A function-local import runs the first time its function is called, so it closes a cycle as surely as
one at the top of a file; it only moves the failure to a later, rarer moment. The graph is read from
the source (tests/support/import_graph.py): an import under `if TYPE_CHECKING:` never runs and is left out.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.import_graph import import_cycles, import_sites

REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"prime_cli": REPO / "prime_cli", "prime_lora": REPO / "plugins" / "prime-lora" / "prime_lora"}


def test_prime_has_no_import_cycle():
    cycles = import_cycles(import_sites(PACKAGES))
    assert cycles == [], (
        "import cycles (a function-local import counts: it only delays the failure); move what both sides "
        "need into the module it belongs to, below both:\n" + "\n".join(cycles))


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return root


def test_a_function_local_import_closes_a_cycle(tmp_path):
    package = write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "def later():\n    from .a import thing\n    return thing\n",
    })
    assert import_cycles(import_sites({"pkg": package})) == ["pkg.a -> pkg.b -> pkg.a"]


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


def test_a_cycle_of_three_is_named_in_order(tmp_path):
    package = write_package(tmp_path / "pkg", {
        "__init__.py": "",
        "a.py": "import pkg.b\n",
        "b.py": "from pkg import c\n",
        "c.py": "from .a import x\n",
    })
    assert import_cycles(import_sites({"pkg": package})) == ["pkg.a -> pkg.b -> pkg.c -> pkg.a"]
