"""`prime env push`: check an environment, build it, and upload it to a package index.

Order, cheapest refusal first: the folder, the project's name and version (a dynamic version is asked
from the build backend) and the index are resolved, and the index is asked which versions it holds: a
wrong token, an index that is down or a version already there stop the push before anything runs.
Then `prime env check` (a failing check refuses the push unless skipped), `python -m build` (the sdist,
then the wheel from it), the provenance file added to the wheel (provenance.py), and twine's metadata
check and upload (push_upload.py). The built files stay in the environment's dist/ folder whatever
happens after the build, and the message of a failed upload says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import provenance
from .build_backend import builds_in_place
from .errors import WorkspaceError
from .index_client import next_version, published_as, published_versions
from .indexes import PackageIndex, configured_indexes, pick_index, redact
from .push_project import Project, project_folder, read_project, shown, workspace_of
from .push_upload import metadata_warnings, upload


class CheckRefused(WorkspaceError):
    """`prime env check` found problems: the push is refused (exit 1, like the check itself)."""

    def __init__(self, env_id: str, problems: list[str]) -> None:
        super().__init__(f"push refused: `prime env check {env_id}` found {len(problems)} problem(s); fix them, "
                         "or push anyway with --skip-check")
        self.problems = problems


@dataclass
class PushResult:
    project: Project
    index: PackageIndex
    files: list[Path] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)
    metadata_warnings: list[str] = field(default_factory=list)
    uploaded: bool = False

    @property
    def install_command(self) -> str | None:
        """How others install it by name; None when the index has no name to use as the OWNER."""
        return f"prime env install {self.index.name}/{self.project.name}" if self.index.name else None


def refuse_published(project: Project, index: PackageIndex) -> None:
    published = published_versions(index, project.name)
    if published_as(project.version, published) is not None:
        raise WorkspaceError(
            f"{project.name} {project.version} is already on index {index.describe()} (a version cannot be "
            f"replaced; newest there: {published[-1]}); set version = \"{next_version(project.version, published)}\" "
            f"{project.where_version_is_set()} and push again")


def _report_from(stdout: str) -> dict[str, Any] | None:
    """The check's JSON report: the last object that starts a line (the environment may print around it)."""
    decoder = json.JSONDecoder()
    start = len(stdout)
    while (start := stdout.rfind("{", 0, start)) >= 0:
        if start == 0 or stdout[start - 1] == "\n":
            try:
                report, _ = decoder.raw_decode(stdout, start)
            except json.JSONDecodeError:
                continue
            if isinstance(report, dict) and "ok" in report:
                return report
    return None


def run_check(project: Project, num_examples: int) -> dict[str, Any]:
    """`prime env check` on the folder itself (whatever else is installed), in a child process as the
    user would run it; its JSON report."""
    with tempfile.TemporaryDirectory(prefix="prime-push-check-") as workspace:
        (Path(workspace) / "environments").mkdir()
        (Path(workspace) / "environments" / project.module).symlink_to(project.module_root, target_is_directory=True)
        done = subprocess.run([sys.executable, "-m", "prime_cli", "env", "check", project.name, "--json",
                               "-n", str(num_examples)], cwd=workspace, capture_output=True, text=True)
    report = _report_from(done.stdout) if done.returncode in (0, 1) else None
    if report is None:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1].removeprefix("error: ") if lines else f"exit {done.returncode} without a report"
        raise WorkspaceError(f"push refused: `prime env check {project.name}` could not run: {reason}")
    if not report.get("ok"):
        raise CheckRefused(project.name, report.get("problems") or [])
    return report


def build(project: Project) -> list[Path]:
    """The sdist and the wheel, in <folder>/dist/ (built in a temporary folder first, so that a failed
    build leaves nothing behind)."""
    with tempfile.TemporaryDirectory(prefix="prime-push-build-") as scratch:
        command = [sys.executable, "-m", "build", "--outdir", scratch, str(project.folder)]
        if builds_in_place(project.folder):
            command.insert(3, "--no-isolation")  # no download of a build backend this Python already has
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
            cause = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "")
            raise WorkspaceError(f"the build of {shown(project.folder)} failed ({cause}); `python -m build "
                                 f"{shown(project.folder)}` shows its whole output")
        dist = project.folder / "dist"
        dist.mkdir(exist_ok=True)
        files = []
        for path in sorted(Path(scratch).iterdir()):
            shutil.move(path, dist / path.name)
            files.append(dist / path.name)
    return files


def _prime_version() -> str:
    from prime_cli import __version__  # lazy: already loaded

    return __version__


def _secrets(index: PackageIndex | None) -> list[str]:
    if index is None:
        return []
    values = [index.password or "", os.environ.get(index.token_var, "") if index.token_var else ""]
    return [value for value in values if value]


def push_environment(target: str, *, repository: str | None = None, visibility: str | None = None,
                     endpoints_path: Path | None = None, skip_check: bool = False, dry_run: bool = False,
                     num_examples: int = 20, step: Callable[[str], None] = lambda text: None) -> PushResult:
    """Raises WorkspaceError (bad input, the index refusing: exit 2; secrets masked) or CheckRefused (exit 1)."""
    index = None
    try:
        folder = project_folder(target)
        index = pick_index(configured_indexes(endpoints_path, workspace_of(folder)), repository, visibility)
        project = read_project(folder)
        step(f"asking index {index.describe()} which versions of {project.name} it holds")
        refuse_published(project, index)
        return _check_build_upload(project, index, skip_check, dry_run, num_examples, step)
    except CheckRefused:
        raise
    except WorkspaceError as exc:
        raise WorkspaceError(redact(str(exc), _secrets(index))) from None


def _check_build_upload(project: Project, index: PackageIndex, skip_check: bool, dry_run: bool,
                        num_examples: int, step: Callable[[str], None]) -> PushResult:
    result = PushResult(project, index)
    if skip_check:
        result.check = {"verdict": "skipped"}
    else:
        step(f"prime env check {project.name}")
        report = run_check(project, num_examples)
        result.check = {"verdict": "passed", "examples": report.get("examples"),
                        "skipped": report.get("skipped") or [], "notes": len(report.get("notes") or [])}
    step(f"building {project.name} (sdist, then the wheel from it)")
    result.files = build(project)
    wheel = next(path for path in result.files if path.suffix == ".whl")
    provenance.add_to_wheel(wheel, {"prime_version": _prime_version(), "check": result.check,
                                    "index": index.name or index.upload_url,
                                    "pushed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ")})
    step("twine check")
    result.metadata_warnings = metadata_warnings(result.files)
    if not dry_run:
        step(f"uploading to {index.describe()}")
        upload(result.files, index)
        result.uploaded = True
    return result
