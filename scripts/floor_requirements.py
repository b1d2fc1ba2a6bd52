"""Print `name==floor` for every requirement with a lower bound in the given pyproject.toml groups.

    python scripts/floor_requirements.py pyproject.toml:dependencies pyproject.toml:local ...

A group is `dependencies` or the name of an extra. Exact pins (`==`) and requirements without a floor
are left out: the first are tested by `make test`, the second promise nothing. `make test-floors`
installs the output in a virtualenv of its own, so that the floors pyproject.toml states are the ones
a test ran with.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*)")


def floors(path: Path, group: str) -> list[str]:
    project = tomllib.loads(path.read_text(encoding="utf-8"))["project"]
    requirements = project["dependencies"] if group == "dependencies" else project["optional-dependencies"][group]
    pins = []
    for requirement in requirements:
        name, specifiers = REQUIREMENT.match(requirement).groups()
        lower = [s.strip()[2:].strip() for s in specifiers.split(",") if s.strip().startswith(">=")]
        if lower:
            pins.append(f"{name}=={lower[0]}")
    return pins


def main(args: list[str]) -> int:
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    seen: dict[str, str] = {}
    for arg in args:
        path, _, group = arg.rpartition(":")
        for pin in floors(Path(path), group):
            name = pin.split("==")[0].lower()
            if seen.setdefault(name, pin) != pin:
                print(f"error: two floors for {name}: {seen[name]} and {pin} ({arg})", file=sys.stderr)
                return 1
    print("\n".join(seen.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
