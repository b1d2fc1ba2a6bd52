"""What `prime env install` lets into the running Python: never a package that replaces prime or changes it.

- `verifiers` (any version, any extras) is satisfied by prime itself: inside prime, `import verifiers` is
  prime's own environment API, so it is never installed (a real one would also bring its own openai).
- PyPI's `prime` (Prime Intellect's CLI) ships a `prime_cli` package and a `prime` script, the same names as
  ours: installing it replaces this tool, so it is skipped.
- Every package in prime's own dependency closure stays at the version installed now: the environment's
  dependencies are resolved and installed with `-c` pins of that closure, and an environment that needs
  another version of one of them is refused with one line naming the package, the wanted and the installed
  versions.

The callers (install.py, index_install.py) check the environment's declared requirements first
(`plan_dependencies`: nothing is installed when one is refused), install the environment itself with
`--no-deps`, then its remaining requirements (`install_dependencies`); what changed is read from
`importlib.metadata` before and after (`snapshot`, `changes`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .errors import WorkspaceError

PRIME_DISTRIBUTION = "prime-cli"
WHY_SKIPPED = {
    "verifiers": "prime provides verifiers itself (in an environment prime loads, `import verifiers` is prime's "
                 "own environment API), so it is not installed",
    "prime": "PyPI's `prime` (Prime Intellect's CLI) ships a `prime_cli` package and a `prime` command, the same "
             "names as this tool, so installing it would replace this tool; it is not installed",
}
# what verifiers would have brought that environments import themselves (`from datasets import load_dataset`,
# MathRubric's math-verify): installed in its place when an environment asks for verifiers
IN_PLACE_OF = {"verifiers": ("datasets", "math-verify")}
KEEP_OR_MOVE = ("`prime env install` never changes a package prime depends on; loosen the environment's "
                "requirement, or use it from a virtualenv of its own")

# pip reports running pip (`run`): arguments after `pip install`, returns (exit code, output)
Pip = Callable[[list[str]], tuple[int, str]]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class DependencyOutcome:
    """What happened to an environment's dependencies: the lines to show, and pip's output."""

    skipped: list[str] = field(default_factory=list)  # "skipped verifiers>=0.1: why"
    output: str = ""


def _requirement(text: str):
    from packaging.requirements import InvalidRequirement, Requirement  # lazy: start-up

    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise WorkspaceError(f"the environment declares an invalid requirement {text!r} ({exc}); fix its "
                             "[project].dependencies") from None


def applies(requirement, extras: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether a requirement counts here (its marker is true for this Python, without or with one of `extras`)."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in {"", *extras})


def prime_closure() -> dict[str, str]:
    """The installed versions of prime and of everything it depends on (all of prime's extras that are
    installed, each dependency's own requirements with the extras asked for), canonical name -> version."""
    versions: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str] | None]] = [(PRIME_DISTRIBUTION, None)]
    while todo:
        name, extras = todo.pop()
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if extras is None:  # prime itself: every extra
            extras = frozenset(dist.metadata.get_all("Provides-Extra") or [])
        key = canonical(dist.metadata["Name"] or name)
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        versions[key] = dist.version
        for text in dist.requires or []:
            requirement = _requirement(text)
            if applies(requirement, set(extras)):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return versions


def split_requirements(requires: list[str]) -> tuple[list[str], list[str]]:
    """The requirements to install (markers that apply), and a line for each one dropped by WHY_SKIPPED."""
    kept, skipped = [], []
    for text in requires:
        requirement = _requirement(text)
        if not applies(requirement):
            continue
        if (why := WHY_SKIPPED.get(canonical(requirement.name))) is not None:
            substitutes = [name for name in IN_PLACE_OF.get(canonical(requirement.name), ())
                           if name not in {canonical(_requirement(k).name) for k in kept}]
            if substitutes:
                why += f"; installing {', '.join(substitutes)} in its place (environments import them)"
            skipped.append(f"skipped {_shown(requirement)}: {why}")
            kept.extend(substitutes)
        else:
            kept.append(str(requirement))
    return list(dict.fromkeys(kept)), skipped


def _shown(requirement) -> str:
    text = str(requirement)
    return text.split(";", 1)[0].strip()


def check_against_prime(project: str, requirements: list[str], closure: dict[str, str]) -> None:
    """WorkspaceError when the environment asks for a version of a prime dependency other than the installed one."""
    for text in requirements:
        requirement = _requirement(text)
        installed = closure.get(canonical(requirement.name))
        if installed is not None and not requirement.specifier.contains(installed, prereleases=True):
            raise WorkspaceError(f"{project} needs {_shown(requirement)}, but prime depends on {requirement.name} "
                                 f"and has {installed} installed; {KEEP_OR_MOVE}")


_CONSTRAINT = re.compile(r"The user requested \(constraint\) (?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+)")
_DEPENDS = re.compile(r"^\s*(?P<who>\S+ \S+) depends on (?P<wanted>.+?)\s*$")


def conflict_line(project: str, output: str) -> str | None:
    """pip's "conflict is caused by" lines, when one side is a pin of prime's, as one line; else None."""
    for pin in _CONSTRAINT.finditer(output):
        name = canonical(pin["name"])
        for line in output.splitlines():
            if (match := _DEPENDS.match(line)) and canonical(_requirement(match["wanted"]).name) == name:
                who = match["who"]
                if canonical(who.split()[0]) in WHY_SKIPPED:  # e.g. verifiers, wanted by one of its dependencies
                    who += " (wanted by a dependency; it would not be installed, but pip resolves what it needs)"
                return (f"{project} needs {who}, which needs {match['wanted']}, but prime depends on "
                        f"{pin['name']} and has {pin['version']} installed; {KEEP_OR_MOVE}")
        return f"{project} needs another version of {pin['name']} than the {pin['version']} prime has; {KEEP_OR_MOVE}"
    return None


@dataclass
class DependencyPlan:
    """An environment's requirements checked against prime: what to install, what was dropped and why."""

    project: str
    kept: list[str]
    skipped: list[str]
    closure: dict[str, str]  # prime's dependency closure, canonical name -> installed version


def plan_dependencies(project: str, requires: list[str]) -> DependencyPlan:
    """Drop what WHY_SKIPPED names; WorkspaceError when a requirement wants another version of a prime dependency."""
    kept, skipped = split_requirements(requires)
    closure = prime_closure()
    check_against_prime(project, kept, closure)
    return DependencyPlan(project, kept, skipped, closure)


def install_dependencies(plan: DependencyPlan, pip: Pip, failure: Callable[[str], WorkspaceError]) -> DependencyOutcome:
    """Install what the plan keeps, prime's closure pinned (`-c`).

    pip first resolves without installing (`--dry-run --report`); what it would install that WHY_SKIPPED names
    (verifiers wanted by some dependency) is left out, the rest installed by exact version with `--no-deps`.
    `failure(output)` makes the error for a pip failure that is not a conflict with prime's pins.
    """
    outcome = DependencyOutcome(list(plan.skipped))
    if not plan.kept:
        return outcome
    with tempfile.TemporaryDirectory(prefix="prime-install-") as folder:
        constraints = Path(folder) / "constraints.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(plan.closure.items())))
        report = Path(folder) / "report.json"
        code, output = pip(["--dry-run", "--report", str(report), "-c", str(constraints), *plan.kept])
        if code != 0:
            line = conflict_line(plan.project, output)
            raise WorkspaceError(line) if line else failure(output)
        wanted = []
        for item in json.loads(report.read_text()).get("install", []):
            name, version = item["metadata"]["name"], item["metadata"]["version"]
            if (why := WHY_SKIPPED.get(canonical(name))) is not None:
                outcome.skipped.append(f"skipped {name} {version} (wanted by a dependency): {why}")
            elif item.get("is_direct"):
                wanted.append(f"{name} @ {item['download_info']['url']}")
            else:
                wanted.append(f"{name}=={version}")
        outcome.output = output
        if wanted:
            code, installed = pip(["--no-deps", "-c", str(constraints), *wanted])
            outcome.output += "\n" + installed
            if code != 0:
                raise failure(installed)
    importlib.invalidate_caches()
    return outcome


def snapshot() -> dict[str, str]:
    """Installed distributions now, canonical name -> version (the first one on sys.path wins, as for imports)."""
    importlib.invalidate_caches()
    versions: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            versions.setdefault(canonical(name), dist.version)
    return versions


def changes(before: dict[str, str], after: dict[str, str], leave_out: str) -> list[str]:
    """`added NAME VERSION` / `changed NAME OLD -> NEW` lines (not for the environment `leave_out` itself)."""
    lines = []
    for name in sorted(after):
        if name == canonical(leave_out):
            continue
        if name not in before:
            lines.append(f"added {name} {after[name]}")
        elif before[name] != after[name]:
            lines.append(f"changed {name} {before[name]} -> {after[name]}")
    lines += [f"removed {name} {before[name]}" for name in sorted(set(before) - set(after))
              if name != canonical(leave_out)]
    return lines
