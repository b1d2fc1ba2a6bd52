"""`prime env push`: check an environment, build it, and upload it to a package index.

Order, cheapest refusal first: the project's name and version are read and the index is asked which
versions it holds (a wrong token, an index that is down or a version already there stop the push
before anything runs); then `prime env check` (a failing check refuses the push unless skipped),
`python -m build` (sdist and wheel), the provenance file added to the wheel (provenance.py), twine's
metadata check, and twine's upload. The built files stay in the environment's dist/ folder whatever
happens after the build, and the message of a failed upload says so.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import provenance
from .build_backend import builds_in_place
from .errors import WorkspaceError
from .index_client import next_version, published_versions, refused, unreachable
from .indexes import PackageIndex, redact
from .names import module_name


class CheckRefused(WorkspaceError):
    """`prime env check` found problems: the push is refused (exit 1, like the check itself)."""

    def __init__(self, env_id: str, problems: list[str]) -> None:
        super().__init__(f"push refused: `prime env check {env_id}` found {len(problems)} problem(s); fix them, "
                         "or push anyway with --skip-check")
        self.problems = problems


@dataclass
class Project:
    folder: Path
    name: str
    version: str | None  # None when the version is dynamic: known after the build
    module: str


@dataclass
class PushResult:
    project: Project
    index: PackageIndex
    version: str
    files: list[Path] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)
    metadata_warnings: list[str] = field(default_factory=list)
    uploaded: bool = False


def read_project(folder: Path) -> Project:
    try:
        data = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise WorkspaceError(f"cannot read {folder / 'pyproject.toml'}: {exc}") from None
    project = data.get("project") or {}
    name = project.get("name")
    if not isinstance(name, str) or not name:
        raise WorkspaceError(f"{folder / 'pyproject.toml'} has no [project] name; add name = \"my-env\"")
    version = project.get("version")
    if version is None and "version" not in (project.get("dynamic") or []):
        raise WorkspaceError(f"{folder / 'pyproject.toml'} has no [project] version; add version = \"0.1.0\"")
    module = module_name(name)
    if not ((folder / f"{module}.py").is_file() or (folder / module / "__init__.py").is_file()):
        raise WorkspaceError(f"prime loads environment {name!r} from the module {module!r}, and {folder} has no "
                             f"{module}.py nor {module}/__init__.py; rename the module or the project")
    return Project(folder, name, str(version) if version is not None else None, module)


def refuse_published(project: Project, version: str, index: PackageIndex) -> None:
    published = published_versions(index, project.name)
    if version in published:
        raise WorkspaceError(
            f"{project.name} {version} is already on index {index.describe()} (a version cannot be replaced; "
            f"newest there: {published[-1]}); set version = \"{next_version(version, published)}\" in "
            f"{project.folder / 'pyproject.toml'} and push again")


def run_check(project: Project, num_examples: int) -> dict[str, Any]:
    """`prime env check` on the folder itself (whatever else is installed), in a child process as the
    user would run it; its JSON report."""
    with tempfile.TemporaryDirectory(prefix="prime-push-check-") as workspace:
        (Path(workspace) / "environments").mkdir()
        (Path(workspace) / "environments" / project.module).symlink_to(project.folder.resolve(), target_is_directory=True)
        done = subprocess.run([sys.executable, "-m", "prime_cli", "env", "check", project.name, "--json",
                               "-n", str(num_examples)], cwd=workspace, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1].removeprefix("error: ") if lines else f"exit {done.returncode}"
        raise WorkspaceError(f"push refused: `prime env check {project.name}` could not run: {reason}")
    start = done.stdout.rfind("\n{")
    report = json.loads(done.stdout[start + 1 if start >= 0 else 0:])
    if not report.get("ok"):
        raise CheckRefused(project.name, report.get("problems") or [])
    return report


def _build_command(project: Project, outdir: Path) -> list[str]:
    command = [sys.executable, "-m", "build", "--outdir", str(outdir), str(project.folder)]
    if builds_in_place(project.folder):
        command.insert(3, "--no-isolation")  # no download of a build backend this Python already has
    return command


def build(project: Project) -> list[Path]:
    """The sdist and the wheel, in <folder>/dist/ (built in a temporary folder first, so that a failed
    build leaves nothing behind)."""
    dist = project.folder / "dist"
    with tempfile.TemporaryDirectory(prefix="prime-push-build-") as scratch:
        done = subprocess.run(_build_command(project, Path(scratch)), capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-12:])
            raise WorkspaceError(f"the build of {project.folder} failed (python -m build, exit {done.returncode}):\n{tail}")
        built = sorted(Path(scratch).iterdir())
        dist.mkdir(exist_ok=True)
        files = []
        for path in built:
            target = dist / path.name
            shutil.move(path, target)
            files.append(target)
    return files


@contextlib.contextmanager
def _twine_quiet() -> Iterator[io.StringIO]:
    """twine prints and logs for a terminal; its lines are captured (and only ever shown as our own)."""
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logger = logging.getLogger("twine")
    logger.addHandler(handler)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield log
    finally:
        logger.removeHandler(handler)


def metadata_warnings(files: list[Path]) -> list[str]:
    """twine's metadata check: problems raise, warnings are returned (once each)."""
    from twine.commands.check import check

    with _twine_quiet() as log:
        failed = check([str(path) for path in files])
    messages = list(dict.fromkeys(line.strip() for line in log.getvalue().splitlines() if line.strip()))
    if failed:
        raise WorkspaceError(f"twine check found a metadata problem in {files[0].parent}: {'; '.join(messages)}")
    return messages


def upload(files: list[Path], index: PackageIndex) -> None:
    from twine.commands.upload import upload as twine_upload
    from twine.exceptions import TwineException
    from twine.settings import Settings

    # an index without authentication still gets a user and password: twine will not upload without them
    user, password = index.credentials() or ("anonymous", "anonymous")
    settings = Settings(repository_url=index.upload_url, username=user, password=password, non_interactive=True,
                        disable_progress_bar=True)
    kept = f"; the built files are kept in {files[0].parent}"
    try:
        with _twine_quiet():
            twine_upload(settings, [str(path) for path in files])
    except OSError as exc:  # requests' errors are OSErrors: an HTTP error has a response, a connection error none
        response = getattr(exc, "response", None)
        if response is None:
            raise WorkspaceError(unreachable(index, type(exc).__name__).args[0] + kept) from None
        if response.status_code in (401, 403):
            raise WorkspaceError(refused(index, response.status_code).args[0] + kept) from None
        raise WorkspaceError(f"index {index.describe()} refused the upload (HTTP {response.status_code} "
                             f"{response.reason}); a version already there cannot be replaced{kept}") from None
    except TwineException as exc:
        raise WorkspaceError(redact(f"twine could not upload to {index.describe()}: {exc}{kept}", [password])) from None


def _prime_version() -> str:
    from prime_cli import __version__

    return __version__


def push_environment(folder: Path, index: PackageIndex, *, skip_check: bool = False, dry_run: bool = False,
                     num_examples: int = 20, step: Callable[[str], None] = lambda text: None) -> PushResult:
    """Raises WorkspaceError (bad input, the index refusing: exit 2) or CheckRefused (exit 1)."""
    project = read_project(folder)
    step(f"asking index {index.name} which versions of {project.name} it holds")
    index.credentials()  # an unset token variable stops here
    if project.version is not None:
        refuse_published(project, project.version, index)
    result = PushResult(project, index, project.version or "")
    if skip_check:
        result.check = {"verdict": "skipped"}
    else:
        step(f"prime env check {project.name}")
        report = run_check(project, num_examples)
        result.check = {"verdict": "passed", "examples": report.get("examples"),
                        "skipped": report.get("skipped") or [], "notes": len(report.get("notes") or [])}
    step(f"building {project.name} (sdist and wheel)")
    result.files = build(project)
    wheel = next(path for path in result.files if path.suffix == ".whl")
    result.version = wheel.name.split("-")[1]
    if project.version is None:
        refuse_published(project, result.version, index)
    provenance.add_to_wheel(wheel, {"prime_version": _prime_version(), "check": result.check, "index": index.name,
                                    "pushed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")})
    step("twine check")
    result.metadata_warnings = metadata_warnings(result.files)
    if not dry_run:
        step(f"uploading to {index.describe()}")
        upload(result.files, index)
        result.uploaded = True
    return result


def token_values(index: PackageIndex) -> list[str]:
    """The secrets a message about `index` must never show."""
    values = [index.password or ""]
    if index.token_var:
        values.append(os.environ.get(index.token_var, ""))
    return [value for value in values if value]
