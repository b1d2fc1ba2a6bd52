"""Run files are appended to only through prime_cli/records (issue 56): the one appender repairs a torn
last line first and writes every line the one way, so no engine or plugin may open a file for appending.

Read from the source with ast: a call named `open` (builtin `open`, `Path.open`, `io.open`, `os.fdopen`
...) given a literal mode holding "a", or any use of `os.O_APPEND`, outside prime_cli/records/.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = [REPO / "prime_cli", REPO / "plugins" / "prime-lora" / "prime_lora"]
RECORDS = REPO / "prime_cli" / "records"
# files appended to that are no run record (path relative to the repository: why)
NOT_RUN_FILES = {
    "prime_cli/serve/process.py": "a served model's stdout and stderr, handed to the server process",
}
_MODE = re.compile(r"[rwxabt+]+")


def _append_mode(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODE.fullmatch(node.value) is not None
            and "a" in node.value)


def _opens_for_append(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "O_APPEND":
        return True
    if not isinstance(node, ast.Call):
        return False
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
    if name not in ("open", "fdopen"):
        return False
    # builtin open(file, mode); Path.open(mode) or io.open / os.fdopen(file, mode) for an attribute
    positional = node.args[1:2] if isinstance(node.func, ast.Name) else node.args[:2]
    modes = [*positional, *(kw.value for kw in node.keywords if kw.arg == "mode")]
    return any(_append_mode(mode) for mode in modes)


def append_sites(source: str) -> list[int]:
    """Line numbers where `source` opens a file for appending."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source)) if _opens_for_append(node))


def test_append_sites_finds_each_way_to_open_for_appending():
    source = textwrap.dedent("""\
        import os
        from pathlib import Path
        open(p, "a")
        open(p, mode="ab")
        Path(p).open("a", encoding="utf-8")
        path.open(mode="a+")
        os.open(p, os.O_WRONLY | os.O_APPEND)
        open(p)
        open(p, "rb")
        path.open("w")
        open("a")
        """)
    assert append_sites(source) == [3, 4, 5, 6, 7]


def test_no_module_outside_records_appends_to_a_file():
    found = []
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if path.is_relative_to(RECORDS) or relative in NOT_RUN_FILES:
                continue
            found += [f"{relative}:{line}" for line in append_sites(path.read_text(encoding="utf-8"))]
    assert found == [], (
        "these open a file for appending; append run files through prime_cli/records (JsonLinesAppender, "
        "append_json_line; for the plugin: prime_cli.train.plugin_api), which repairs a torn last line "
        "first:\n" + "\n".join(found))
