"""The REST API's OpenAPI document: generated from the models, committed under schema/, served by
the server; and the running server holds to it under generated requests (schemathesis)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import FAST_SHARE, REPO, THOROUGH, journal_bytes
from http_server import http_server_in_process

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

DOCUMENT = REPO / "schema" / "openapi.json"
EXAMPLES = 8 if THOROUGH else max(2, 8 // FAST_SHARE)
"""Generated requests per operation: enough to reach every operation's refusals, fast enough for CI
(the default, fast hypothesis profile runs a quarter, as for every property test: see tests/conftest.py)."""


def test_the_committed_openapi_document_is_what_the_models_generate() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "openapi.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_openapi_check_fails_with_the_fix_when_the_file_drifts(tmp_path: Path) -> None:
    drifted = tmp_path / "openapi.json"
    drifted.write_text(DOCUMENT.read_text(encoding="utf-8").replace("Save a memory", "Save"), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO / 'tools')!r}); import openapi, pathlib; "
         f"sys.exit(openapi.main(['--check'], path=pathlib.Path({str(drifted)!r})))"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1 and "python tools/openapi.py" in result.stderr


def test_the_server_serves_the_committed_document_and_it_covers_every_route(project: Path) -> None:
    committed = json.loads(DOCUMENT.read_text(encoding="utf-8"))
    assert committed["openapi"] == "3.1.0"
    with http_server_in_process(project) as base:
        assert httpx.get(f"{base}/api/v1/openapi.json").json() == committed
    operations = {(method.upper(), path) for path, item in committed["paths"].items() for method in item}
    assert ("PUT", "/projects/{project}/memories/{memory_id}") in operations
    assert ("GET", "/projects/{project}/events") in operations and len(operations) >= 20
    assert ("GET", "/projects/{project}/stream") in operations


def test_every_operation_holds_to_the_document_under_generated_requests(project: Path) -> None:
    schema = schemathesis.openapi.from_dict(json.loads(DOCUMENT.read_text(encoding="utf-8")))
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    with http_server_in_process(project, "--rate-limit", "0") as base:
        seed = httpx.post(f"{base}/api/v1/projects/project/memories", json={"content": "A memory to aim at."})
        memory_id = seed.json()["memory"]["id"]
        api = f"{base}/api/v1"

        def aimed(case: Any) -> Any:
            """Most cases name the served project and a real memory, so that they reach the service."""
            if "project" in (case.path_parameters or {}):
                case.path_parameters["project"] = "project"
            if "memory_id" in (case.path_parameters or {}) and len(str(case.body)) % 2 == 0:
                case.path_parameters["memory_id"] = memory_id
            return case

        for result in schema.get_all_operations():
            operation = result.ok()
            if "text/event-stream" in json.dumps(operation.definition.raw):
                continue  # the change stream never ends (the UI's tests listen to it)

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy().map(aimed))
            def holds(case: Any) -> None:
                case.call_and_validate(base_url=api, checks=checks)

            holds()
        assert journal_bytes(project)  # the journal is still there, and the server still answers
        assert httpx.get(f"{api}/projects/project/stats").status_code == 200
