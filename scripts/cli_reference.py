"""Write docs/cli.md, the flag tables of every `prime` command, from the commands' own --help data.

    .venv/bin/python scripts/cli_reference.py           # rewrite docs/cli.md (make docs)
    .venv/bin/python scripts/cli_reference.py --check   # exit 1 when docs/cli.md differs (make test runs it)

The tables are built from the same click objects `--help` prints (typer vendors click, so they are
recognised by what they have rather than by class), so a flag added, renamed or given a
new default shows up here; the test fails until the file is regenerated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import typer

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "cli.md"
HEADER = """# Command-line reference

Every `prime` command and its flags, generated from the commands' `--help` by
`scripts/cli_reference.py` (`make docs`); `make test` fails when this file and `--help` disagree.
For what the commands do and how they fit together, start with the [README](../README.md).
"""


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def is_option(param) -> bool:
    return param.param_type_name == "option"


def flag_names(param) -> str:
    names = [*param.opts, *param.secondary_opts]
    return ", ".join(f"`{name}`" for name in names)


def value_of(param, ctx) -> str:
    if is_option(param) and param.is_flag:
        return ""
    return f"`{param.make_metavar(ctx)}`"


def default_of(param) -> str:
    default = param.default
    if default is None or default == () or callable(default) or getattr(param, "is_flag", False) and not default:
        return ""
    return f"`{default}`"


def command_section(path: str, command, ctx) -> list[str]:
    lines = [f"## `{path}`", ""]
    help_text = (command.help or command.short_help or "").strip()
    if help_text:
        lines += [help_text.split("\n\n")[0].replace("\n", " ").strip(), ""]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    options = [p for p in command.params if is_option(p) and not p.hidden]
    if arguments:
        lines += ["Arguments:", ""]
        for argument in arguments:
            lines.append(f"- {value_of(argument, ctx)}: {cell(getattr(argument, 'help', None) or '')}"
                         f"{'' if argument.required else ' (optional)'}")
        lines.append("")
    if options:
        lines += ["| Flag | Value | Default | What it does |", "| --- | --- | --- | --- |"]
        for option in options:
            lines.append(f"| {flag_names(option)} | {value_of(option, ctx)} | {default_of(option)} | "
                         f"{cell(option.help or '')} |")
        lines.append("")
    return lines


def walk(command, path: str, parent=None) -> list[str]:
    ctx = command.context_class(command, info_name=path.split()[-1], parent=parent)
    if hasattr(command, "list_commands"):
        lines = command_section(path, command, ctx) if path != "prime" else []
        for name in command.list_commands(ctx):
            lines += walk(command.get_command(ctx, name), f"{path} {name}", ctx)
        return lines
    return command_section(path, command, ctx)


def render() -> str:
    from prime_cli.cli.main import app

    root = typer.main.get_command(app)
    body = walk(root, "prime")
    return HEADER + "\n" + "\n".join(body).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/cli.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run `make docs`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
