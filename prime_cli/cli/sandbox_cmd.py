"""`prime sandbox list|prune|image build`: the sandboxes prime left behind, and the offline base image."""

from __future__ import annotations

import typer

from .errors import fail

sandbox_app = typer.Typer(
    help="List and remove the sandboxes prime left behind (containers labelled prime.sandbox in podman "
    "and docker, bwrap cgroup folders), and build the offline base image for podman/docker.",
    no_args_is_help=True,
)
image_app = typer.Typer(help="The offline base image (Debian bookworm with python3, sympy, numpy).", no_args_is_help=True)
sandbox_app.add_typer(image_app, name="image")


def _show(item) -> str:
    return f"{item.kind:<7} {item.name:<40} {item.status:<10} {item.owner} ({item.owner_state})"


@sandbox_app.command("list")
def list_cmd() -> None:
    """Every sandbox prime left: its provider, name, state and owner process (alive or dead).

    A running prime's own sandboxes are listed too; bwrap sandboxes die with their owner, so only their
    leftover cgroup folders can appear.
    """
    from prime_cli.sandbox.inventory import list_sandboxes  # lazy: start-up

    found, notes = list_sandboxes()
    for note in notes:
        typer.echo(note, err=True)
    for item in found:
        typer.echo(_show(item))
    dead = sum(1 for item in found if item.alive is False)
    typer.echo(f"{len(found)} sandbox(es), {dead} with a dead owner" + (" (prime sandbox prune removes them)" if dead else ""))


@sandbox_app.command("prune")
def prune_cmd(
    everything: bool = typer.Option(False, "--all", help="Also remove sandboxes whose owner still runs or ran on another host."),
) -> None:
    """Remove the sandboxes prime made whose owner process is dead (what a SIGKILL or a crash left), and
    print each one removed. Nothing prime did not make is touched."""
    from prime_cli.sandbox.inventory import prune  # lazy: start-up

    removed, notes = prune(everything)
    for note in notes:
        typer.echo(note, err=True)
    for item in removed:
        typer.echo(f"removed {_show(item)}")
    typer.echo(f"{len(removed)} sandbox(es) removed")


@image_app.command("build")
def image_build(
    engine: str = typer.Option("podman", "--engine", help="Container engine to import the image into: podman or docker."),
) -> None:
    """Build the base image once (mmdebstrap from this machine's apt sources, ~30 s, cached in
    ~/.cache/prime/sandbox-images) and import it as localhost/prime-sandbox-python:bookworm.
    Needs root the first time; importing an already built image does not."""
    if engine not in ("podman", "docker"):
        fail(f"--engine must be podman or docker (got {engine!r})")
    from prime_cli.sandbox.images import ImageError, ensure_base_image  # lazy: start-up

    try:
        tag = ensure_base_image(engine)
    except ImageError as exc:
        fail(str(exc))
    typer.echo(f"{engine}: {tag} is ready")
