"""Helpers for tests that run the ``eventmem`` command as a user runs it: a real process in a real
project directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import eventmem_command

from eventmem.service import Hit

HIT_FIELDS = set(Hit.__struct_fields__)


def eventmem(
    cwd: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``eventmem *args`` run in ``cwd`` with ``stdin`` as its input; whatever its exit code."""
    return subprocess.run(
        eventmem_command(*args), cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=120
    )


def ok_json(cwd: Path, *args: str, stdin: str = "") -> Any:
    """The JSON that ``eventmem *args --json`` prints, the command having succeeded."""
    result = eventmem(cwd, *args, "--json", stdin=stdin)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def save(project: Path, text: str, *flags: str, stdin: str = "") -> dict[str, Any]:
    """The memory ``eventmem save`` saved."""
    data = ok_json(project, "save", text, *flags, stdin=stdin)
    assert data["status"] == "success"
    memory: dict[str, Any] = data["memory"]
    return memory


def search_ids(project: Path, *args: str) -> list[str]:
    """The ids ``eventmem search`` found, best first (each hit checked to have the fields of a Hit)."""
    data = ok_json(project, "search", *args)
    assert data["status"] == "success"
    for hit in data["results"]:
        assert set(hit) == HIT_FIELDS
    return [hit["id"] for hit in data["results"]]


def only_segment(project: Path) -> Path:
    """The project's one journal segment."""
    (segment,) = (project / ".eventmem" / "journal").glob("*.jsonl")
    return segment
