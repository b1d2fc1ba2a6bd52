"""`prime lab setup`: write a ready workspace."""

from __future__ import annotations

from pathlib import Path

import typer

from .errors import fail

lab_app = typer.Typer(help="Set up a workspace (configs/, environments/).", no_args_is_help=True)


@lab_app.command("setup")
def setup(
    path: Path = typer.Option(Path("."), "-p", "--path", help="Folder to set up (created if missing)."),
    force: bool = typer.Option(False, "--force", help="Overwrite files you changed since prime wrote them."),
) -> None:
    """Write configs/endpoints.toml, configs/{eval,gepa,rl}/*.toml, environments/ with the examples and a .gitignore.

    Safe to run again: files you changed are kept unless --force is given.
    """
    from prime_cli.workspace import WorkspaceError, setup_lab

    if path.exists() and not path.is_dir():
        fail(f"{path} is a file; give a folder to set up")
    try:
        actions = setup_lab(path, force=force)
    except (WorkspaceError, OSError) as exc:
        fail(str(exc))
    counts: dict[str, int] = {}
    for item in actions:
        counts[item.action] = counts.get(item.action, 0) + 1
        if item.action not in ("unchanged", "created"):
            typer.echo(f"{item.action}: {item.path}")
    created = [a.path for a in actions if a.action == "created" and a.path.parts[0] != "environments"]
    for item in created:
        typer.echo(f"created {item}")
    envs = sorted({a.path.parts[1] for a in actions if a.path.parts[0] == "environments"})
    if envs:
        typer.echo(f"environments/: {', '.join(envs)}")
    typer.echo("; ".join(f"{n} {action}" for action, n in sorted(counts.items())))
    typer.echo("next: prime eval run configs/eval/reverse-text.toml")
