"""Helpers for tests that run the ``eventmem`` command as a user runs it, in a real project directory.

:func:`eventmem` calls :func:`eventmem.main.main` in this process, as the installed command does: in
the project's directory, with the given environment and standard input, its standard output and
error captured and its exit code returned (argparse's exits included). That is the same code path
as a process without the interpreter's start-up, which keeps the suite fast. What only a real
process shows (exit codes seen by a shell, stdout purity, signals, a closed pipe, a clean
interpreter) is tested with :func:`eventmem_process`, which runs ``python -m eventmem``.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

from conftest import eventmem_command

from eventmem.service import Hit

HIT_FIELDS = set(Hit.__struct_fields__)


def eventmem_process(
    cwd: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m eventmem *args`` run in ``cwd`` as a real process, with ``stdin`` as its input; whatever
    its exit code."""
    return subprocess.run(
        eventmem_command(*args), cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=120
    )


def eventmem(
    cwd: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``eventmem *args`` run in ``cwd`` with ``stdin`` as its input (and ``env``, if given, as its whole
    environment); whatever its exit code. In this process (see the module docs)."""
    from eventmem.main import main

    saved_cwd, saved_env = os.getcwd(), dict(os.environ)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    out, err = io.BytesIO(), io.BytesIO()
    streams = (
        io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", write_through=True),
    )
    sys.stdin, sys.stdout, sys.stderr = streams
    root.handlers = []  # (so that the command's own logging set-up takes effect, on its stderr)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as exit:
            code = _exit_code(exit.code)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        root.handlers, root.level = saved_handlers, saved_level
    result = subprocess.CompletedProcess(["eventmem", *args], code, _text(out.getvalue()), _text(err.getvalue()))
    for stream in streams:
        stream.close()
    return result


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _text(data: bytes) -> str:
    """What ``subprocess.run(..., text=True)`` would have read."""
    return data.decode("utf-8", errors="strict").replace("\r\n", "\n")


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
