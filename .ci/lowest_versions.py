"""The lowest version of each of eventmem's own dependencies and extras that pyproject.toml allows, as pip
constraints (``name==version``, one a line): CI installs them and runs the tests, so a user whose
environment holds an older library than the newest gets a working eventmem or pip's refusal, never a
broken one."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

EXTRAS = ("onnx", "postgres")
"""The extras whose libraries eventmem itself imports (``test`` holds the tools the tests drive)."""

_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*(?P<bounds>[^;]*)")


def lowest(requirement: str) -> str | None:
    """``name==version`` of a requirement's ``>=`` or ``==`` bound; None for one naming another extra."""
    found = _REQUIREMENT.match(requirement.strip())
    if found is None:
        raise SystemExit(f"a requirement this script cannot read: {requirement!r}")
    name = found["name"]
    if name == "eventmem":
        return None
    for bound in found["bounds"].split(","):
        bound = bound.strip()
        if bound.startswith((">=", "==")):
            return f"{name}=={bound[2:].strip()}"
    raise SystemExit(f"{requirement!r} states no lower bound: say the oldest version eventmem works with")


def main() -> None:
    pyproject = Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml")
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *(r for extra in EXTRAS for r in project["optional-dependencies"][extra])]
    print("\n".join(c for c in map(lowest, requirements) if c is not None))


if __name__ == "__main__":
    main()
