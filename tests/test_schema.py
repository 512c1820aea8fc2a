"""The committed JSON Schema matches the event Structs, and the golden journal obeys it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO

from eventmem.core.codec import KNOWN_TYPES, UPCASTERS

SCHEMA_FILE = REPO / "schema" / "events.schema.json"
GOLDEN = Path(__file__).parent / "golden" / "journal_v1.jsonl"


def schema_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("eventmem_schema_tool", REPO / "tools" / "schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_schema_matches_what_the_event_structs_generate() -> None:
    expected = schema_tool().render()
    committed = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    assert committed == expected, (
        "schema/events.schema.json is out of date with eventmem/core/events.py: "
        "run `python tools/schema.py` and commit the result"
    )


def test_the_schema_tool_check_passes_on_the_committed_file() -> None:
    result = subprocess.run(
        [sys.executable, "tools/schema.py", "--check"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_tool_check_fails_with_a_fix_when_the_file_drifts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = schema_tool()
    drifted = tmp_path / "events.schema.json"
    drifted.write_text(tool.render().replace('"title"', '"titel"', 1), encoding="utf-8")
    assert tool.main(["--check"], drifted) == 1
    assert "run `python tools/schema.py`" in capsys.readouterr().err
    assert tool.main(["--check"], tmp_path / "missing.json") == 1
    assert "missing" in capsys.readouterr().err


def test_the_schema_tool_writes_the_generated_schema(tmp_path: Path) -> None:
    tool = schema_tool()
    target = tmp_path / "schema" / "events.schema.json"
    assert tool.main([], target) == 0
    assert target.read_text(encoding="utf-8") == tool.render()
    assert tool.main(["--check"], target) == 0


def upcast(data: dict[str, Any], line: bytes) -> dict[str, Any]:
    for upcaster in UPCASTERS:
        if upcaster.type == data["type"] and upcaster.marker in line:
            data = upcaster.upcast(data)
    return data


def test_every_golden_line_of_a_known_type_is_valid_against_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    checked = 0
    for number, line in enumerate(GOLDEN.read_bytes().splitlines(), start=1):
        data = json.loads(line)
        if data["type"] not in KNOWN_TYPES:
            continue
        errors = [error.message for error in validator.iter_errors(upcast(data, line))]
        assert errors == [], f"golden line {number}: {errors}"
        checked += 1
    assert checked == 16


def test_the_schema_rejects_lines_that_are_not_current_events() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))
    ts = "2026-01-01T00:00:00.000000Z"
    assert validator.is_valid({"type": "saved", "id": "e", "ts": ts, "memory": "m", "content": "c"})
    assert not validator.is_valid({"type": "saved", "id": "e", "ts": ts, "memory": "m"})
    assert not validator.is_valid({"type": "saved", "id": "e", "ts": ts, "memory": "m", "text": "old shape"})
    assert not validator.is_valid({"type": "saved", "id": "e", "ts": ts, "memory": "m", "content": "c", "tags": "a"})
    assert not validator.is_valid({"type": "pinned", "id": "e", "ts": ts})
