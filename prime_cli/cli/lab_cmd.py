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
    prime_rl: bool = typer.Option(False, "--prime-rl", help="Write only configs/endpoints.toml, the prime-rl v0.4 training configs (configs/prime-rl/, with reverse-text-cpu.toml, the one sized for a CPU), the environments and .gitignore. Nothing is cloned: prime train runs them with the installed trainer plugin."),
) -> None:
    """Write configs/endpoints.toml, configs/{eval,gepa}/*.toml, configs/rl/*.toml (hosted shape),
    configs/prime-rl/*.toml (prime-rl v0.4 shape; the same runs, sized for a GPU), configs/rl/reverse-text-cpu.toml
    (sized for a CPU), environments/ with the examples and a .gitignore.

    Safe to run again: files you changed are kept unless --force is given.
    """
    from prime_cli.workspace import WorkspaceError, setup_lab  # lazy: start-up

    if path.exists() and not path.is_dir():
        fail(f"{path} is a file; give a folder to set up")
    try:
        actions = setup_lab(path, force=force, prime_rl_only=prime_rl)
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
    if prime_rl:
        typer.echo("prime-rl is not cloned (no download needed): the installed trainer plugin runs these configs; "
                   "next: prime train configs/prime-rl/reverse-text.toml --dry-run")
        return
    typer.echo("next: prime eval run configs/eval/reverse-text.toml")
