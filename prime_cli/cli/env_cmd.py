"""`prime env init|install|list|info|check`: manage and check environment packages."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import typer

from . import options
from .errors import fail, fail_error, json_object_arg
from .options import EnvArgsOpt

VERBOSE_HELP = "When the environment fails to load, also print the traceback of its error."

env_app = typer.Typer(help="Create, install, list, inspect and check environments.", no_args_is_help=True)


@env_app.command("init")
def init(
    name: str = typer.Argument(..., help="Environment id, e.g. my-env (the module and folder become my_env)."),
    path: Path = typer.Option(Path("."), "-p", "--path", help="Workspace holding the environments/ folder."),
    force: bool = typer.Option(False, "--force", help="Overwrite the files of an existing environment."),
    v1: bool = typer.Option(False, "--v1", help="A verifiers v1 taskset (TaskData rows, a Task with @vf.reward "
                            "methods, a Taskset) instead of a load_environment() module; docs/environments.md "
                            "compares the two."),
) -> None:
    """Create ./environments/<module>/ with a pyproject ([tool.prime.eval] defaults), a README and load_environment()
    (or, with --v1, a <module>/ package exporting a verifiers v1 Taskset)."""
    from prime_cli.workspace import WorkspaceError, init_environment  # lazy: start-up

    try:
        files = init_environment(name, path, force=force, v1=v1)
    except WorkspaceError as exc:
        fail(str(exc))
    for file in files:
        typer.echo(f"created {file}")
    typer.echo(f"next: prime env install {name.strip()} && prime eval run {name.strip()} -m MODEL")


@env_app.command("install")
def install(
    target: str = typer.Argument(..., help="What to install: NAME (./environments/<module>/ when that folder exists, "
                                 "else NAME from the only configured package index), OWNER/NAME[==VERSION] (from "
                                 "the index named OWNER), or the path of a folder with a pyproject.toml."),
    path: Path = typer.Option(Path("."), "-p", "--path", help="Workspace holding the environments/ folder."),
    endpoints_path: Path | None = typer.Option(
        None, "-e", "--endpoints-path",
        help="The file whose [[index]] tables name the package indexes (~/.pypirc's sections count too). "
        "Default: configs/endpoints.toml in the workspace."),
) -> None:
    """Install an environment into this Python environment: a local folder editable (pip install -e), or a
    published one from a package index.

    \b
      prime env install my-env              ./environments/my_env/, editable
      prime env install ./path/to/env       that folder, editable
      prime env install team/my-env         the newest my-env on the index named team
      prime env install team/my-env==1.2.0  that version

    OWNER is the `name` of an [[index]] table in configs/endpoints.toml or a section of ~/.pypirc. Only that
    index can provide the environment itself (a same-named project elsewhere is never installed); its
    dependencies come from your usual indexes and that one.

    An install never replaces or changes prime: a dependency on `verifiers` is satisfied by prime itself and
    one on PyPI's `prime` (another CLI with the same `prime` command) is skipped, each with a line saying so;
    packages prime depends on stay at their installed versions (an environment that needs another version of
    one is refused, naming it). Every package added or changed is listed.
    """
    from rich.console import Console  # lazy: start-up

    from prime_cli.workspace import WorkspaceError, install_target  # lazy: start-up
    from prime_cli.workspace.install import InstallResult  # lazy: start-up

    try:
        with Console(stderr=True).status(f"installing {target} with pip ..."):
            result = install_target(target, path, endpoints_path)
    except WorkspaceError as exc:
        fail(str(exc))
    if isinstance(result, InstallResult):
        typer.echo(f"installed {result.folder} (editable)")
    else:
        typer.echo(f"installed {result.project} {result.version} from index {result.index.name} "
                   f"({result.index.simple_url})")
    for line in [*result.skipped, *result.changes]:
        typer.echo(line)


@env_app.command("list")
def list_(
    path: Path = typer.Option(Path("."), "-p", "--path", help="Workspace holding the environments/ folder."),
    json_output: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Environments: installed packages with a load_environment() (depending on prime-cli or verifiers; trainer
    plugins are left out) and local ones in ./environments/, which are used when both exist."""
    from prime_cli.workspace import list_environments  # lazy: start-up

    entries = list_environments(path)
    if json_output:
        typer.echo(json.dumps([{"name": e.name, "installed_version": e.version, "local_version": e.local_version,
                                "location": e.location, "used": e.used, "installed_location": e.installed_location}
                               for e in entries], indent=1))
        return
    if not entries:
        typer.echo("no environments: create one with `prime env init NAME`")
        return
    from rich.console import Console  # lazy: start-up
    from rich.table import Table  # lazy: start-up

    table = Table("environment", "installed", "local", "location", box=None)
    for e in entries:
        table.add_row(e.name, e.version or "-", e.local_version or "-", e.location or "")
    console = Console()
    if not console.is_terminal:  # a pipe or a file: whole lines, paths not cut at 80 columns
        console = Console(width=10_000)
    console.print(table)
    for e in entries:
        if e.shadowed:
            module = e.name.replace("-", "_")
            console.print(f"{e.name}: ./environments/{module}/ is used here, not the installed copy in "
                          f"{e.installed_location} (`prime env install {e.name}` installs the local one)",
                          soft_wrap=True, highlight=False, markup=False)


@env_app.command("info")
def info(
    name: str = typer.Argument(..., help="Environment id, e.g. gsm8k."),
    env_args: str | None = typer.Option(None, "-a", "--env-args", help="JSON of load_environment() arguments, used to load its datasets."),
    path: Path = typer.Option(Path("."), "-p", "--path", help="Workspace holding the environments/ folder."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help=VERBOSE_HELP),
) -> None:
    """Arguments (with defaults), dataset sizes, reward functions and tools of an environment."""
    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.workspace import environment_info  # lazy: start-up

    args = json_object_arg("-a/--env-args", env_args or None) or {}
    try:
        described = environment_info(name, args, path)
    except UserInputError as exc:
        fail_error(exc, verbose)
    typer.echo(f"{described.env_id}  ({described.module_file})")
    if described.env_class:
        typer.echo(f"class: {described.env_class}")
    typer.echo("arguments:")
    for arg, annotation, default in described.arguments:
        typer.echo(f"  {arg}{': ' + annotation if annotation else ''}{' = ' + default if default else ''}")
    sizes = [f"{label} {size}" for label, size in (("train", described.dataset_size), ("eval", described.eval_dataset_size))
             if size is not None]
    typer.echo(f"datasets: {', '.join(sizes) if sizes else 'not loaded'}")
    if described.dataset_problem:
        typer.echo(f"  ({described.dataset_problem})")
    if described.reward_functions:
        typer.echo("reward functions: " + ", ".join(f"{n} (weight {w:g})" for n, w in described.reward_functions))
    if described.rubric_problem:
        typer.echo(f"reward functions: none ({described.rubric_problem.split(': ', 1)[-1]}; "
                   "eval, check and train refuse it)")
    if described.tools:
        typer.echo("tools: " + ", ".join(described.tools))
    if described.eval_defaults:
        typer.echo("eval defaults: " + ", ".join(f"{k}={v}" for k, v in described.eval_defaults.items()))
    if described.provenance:
        typer.echo(f"provenance: {described.provenance}")


@env_app.command("check")
def check(
    name: str = typer.Argument(..., help="Environment id, e.g. reverse-text."),
    env_args: EnvArgsOpt = None,
    num_examples: int = typer.Option(20, "-n", "--num-examples", help="Eval rows to check (-1: all)."),
    model: options.JudgeModelOpt = None,
    base_url: options.BaseUrlOpt = None,
    api_key_var: options.ApiKeyVarOpt = None,
    endpoints_path: options.EndpointsPathOpt = None,
    max_retries: options.MaxRetriesOpt = None,
    json_output: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help=VERBOSE_HELP),
) -> None:
    """Find a broken reward before paying for rollouts; no policy model is called.

    On a sample of the eval split: every row has a prompt, answers and info have one type, the prompt
    asks for the format the parser reads, tool schemas are valid and env_response answers a scripted turn.
    The rubric then scores, through the environment's own rollout and group scoring, a reference reply
    (the row's answer written as the parser reads it) and adversarial replies: an empty reply, another
    row's answer, the answer without its format, a 3-character prefix, the prompt echoed back, a long
    repetition. The reference must get the top reward and no reward function may pay the adversarial
    replies like the reference. Judge-model rewards (JudgeRubric) are skipped with a note unless -m names
    a judge model, which then scores every reply (one judge call per reply and rubric; -b, -k, -e as in
    `prime eval run`). Exit 0: no problem; 1: problems, one line each; 2: bad input.
    """
    if num_examples == 0 or num_examples < -1:
        fail(f"-n/--num-examples must be a positive number, or -1 for all (got {num_examples})")
    if max_retries is not None and max_retries < 0:
        fail(f"--max-retries must be at least 0 (got {max_retries})")
    given = {"-b/--api-base-url": base_url, "-k/--api-key-var": api_key_var,
             "-e/--endpoints-path": endpoints_path, "--max-retries": max_retries}
    if model is None and any(value is not None for value in given.values()):
        flag = next(flag for flag, value in given.items() if value is not None)
        fail(f"{flag} applies to the judge model; add -m MODEL")
    args = json_object_arg("-a/--env-args", env_args or None) or {}
    from prime_cli.envs.errors import UserInputError  # lazy: start-up
    from prime_cli.workspace.env_check import JudgeFlags, check_environment  # lazy: start-up

    judge = JudgeFlags(model, base_url, api_key_var, endpoints_path, max_retries) if model is not None else None
    # with --json, stdout is the report alone: what the environment prints while it loads goes to stderr
    quiet = contextlib.redirect_stdout(sys.stderr) if json_output else contextlib.nullcontext()
    try:
        with quiet:
            report = check_environment(name, args, num_examples, judge)
    except UserInputError as exc:
        fail_error(exc, verbose)
    if json_output:
        typer.echo(json.dumps(report.as_dict(), indent=1))
    else:
        from .env_check_view import print_report  # lazy: start-up

        print_report(report)
    raise typer.Exit(0 if report.ok else 1)


@env_app.command("push")
def push(
    path: Path = typer.Option(Path("."), "-p", "--path", help="The environment's folder (with its pyproject.toml), "
                              "or the name of one under ./environments/."),
    repository: str | None = typer.Option(None, "-r", "--repository", help="The index to upload to: the name of an "
                                          "[[index]] in configs/endpoints.toml or of a ~/.pypirc section, or an upload "
                                          "URL (credentials then from TWINE_USERNAME / TWINE_PASSWORD)."),
    visibility: str | None = typer.Option(None, "--visibility", help="public or private: the [[index]] configured "
                                          "with that visibility. Default: the only [[index]] table (a ~/.pypirc "
                                          "section is used only when -r names it)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check and build, and say what would be uploaded where; "
                                 "upload nothing (the index is still asked whether the version is new)."),
    skip_check: bool = typer.Option(False, "--skip-check", help="Push without running `prime env check` first "
                                    "(recorded in the package)."),
    num_examples: int = typer.Option(20, "-n", "--num-examples", help="Eval rows `prime env check` checks (-1: all)."),
    endpoints_path: str | None = typer.Option(None, "-e", "--endpoints-path", help="The TOML file holding the "
                                              "[[index]] tables. Default: configs/endpoints.toml here, else in "
                                              "the workspace of an environments/<module>/ folder."),
) -> None:
    """Share an environment: check it, build it, upload it to a package index.

    Runs `prime env check` and refuses an environment that fails it; builds an sdist and a wheel into
    the folder's dist/ with `python -m build`, records the check's verdict and the prime version in
    the wheel, checks the metadata with twine and uploads both files with twine. A version the index
    already holds is refused before anything runs, with the next version suggested. Others install it
    with `prime env install OWNER/NAME`, OWNER being the index's name. Exit 0: pushed (or --dry-run
    passed); 1: the environment check failed; 2: bad input, or the index refused or could not be reached.
    """
    if visibility is not None and visibility.lower() not in ("public", "private"):
        fail(f"--visibility must be public or private (got {visibility!r})")
    if num_examples == 0 or num_examples < -1:
        fail(f"-n/--num-examples must be a positive number, or -1 for all (got {num_examples})")
    from rich.console import Console  # lazy: start-up

    from prime_cli.workspace import WorkspaceError  # lazy: start-up
    from prime_cli.workspace.push import CheckRefused, push_environment  # lazy: start-up
    from prime_cli.workspace.push_project import shown  # lazy: start-up

    if skip_check:
        typer.echo("warning: --skip-check: pushing without running `prime env check` (recorded in the package)", err=True)
    try:
        with Console(stderr=True).status("pushing ...") as status:
            result = push_environment(str(path), repository=repository, visibility=visibility.lower() if visibility else None,
                                      endpoints_path=Path(endpoints_path) if endpoints_path else None,
                                      skip_check=skip_check, dry_run=dry_run, num_examples=num_examples,
                                      step=lambda text: status.update(f"{text} ..."))
    except CheckRefused as exc:
        typer.echo(f"error: {exc}:", err=True)
        for problem in exc.problems:
            typer.echo(f"  {problem}", err=True)
        raise typer.Exit(1) from None
    except WorkspaceError as exc:
        fail(str(exc))
    for warning in result.metadata_warnings:
        typer.echo(f"twine check: {warning}", err=True)
    check = result.check
    verdict = (f"prime env check passed on {check.get('examples')} rows" if check["verdict"] == "passed"
               else "prime env check skipped")
    files = ", ".join(f"{p.name} ({p.stat().st_size / 1024:.1f} KiB)" for p in result.files)
    name, version, where = result.project.name, result.project.version, result.index.describe()
    if not result.uploaded:
        typer.echo(f"dry run: {verdict}; built {files} in {shown(result.files[0].parent)}; would upload {name} {version} "
                   f"to {where}")
        return
    typer.echo(f"pushed {name} {version} to {where}: {verdict}; {files}")
    if result.install_command:
        typer.echo(f"install it elsewhere with: {result.install_command}")
    else:
        typer.echo(f"to install it by name elsewhere, add an [[index]] table for {where} to configs/endpoints.toml "
                   "(its name is the OWNER in `prime env install OWNER/NAME`)")
