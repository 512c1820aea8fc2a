"""``eventmem serve`` in a subprocess, driven by real stdio MCP clients.

The SDK's own stdio client checks the protocol end to end; a raw client (JSON-RPC lines written to
the process by hand) checks what a client sees on the wire: stdout carries nothing but protocol,
closing stdin ends the server with exit code 0, and no lock is left held.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import WAIT, ProcessGroup, eventmem_command, git, journal_events, journal_files
from mcp_client import (
    DEFAULT_TOOLS,
    STDIO_CLIENT,
    assert_clean_stderr,
    call,
    call_error,
    serve,
    server_env,
)

pytestmark = pytest.mark.anyio

# -- the SDK's stdio client -----------------------------------------------------------------------


async def test_a_stdio_client_initializes_lists_the_tools_and_calls_each_one(project: Path, tmp_path: Path) -> None:
    errlog = tmp_path / "stderr.log"
    async with serve(project, server_env(), errlog) as session:
        init = await session.initialize()
        assert init.server_info.name == "eventmem"
        assert init.capabilities.tools is not None
        assert init.instructions and "save_context" in init.instructions

        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} >= DEFAULT_TOOLS

        saved = await call(session, "save_context", context_text="The build uses uv and a lock file.", tags=["build"])
        stored = await call(
            session, "store_memory", content="Never push to main directly.", type="convention", importance=0.9
        )
        memory_id = stored["memory"]["id"]
        retrieved = await call(session, "retrieve_context", query="build uv lock file")
        assert retrieved["results"][0]["id"] == saved["id"]
        recalled = await call(session, "recall_memories", query="push to main", type="convention")
        assert [hit["id"] for hit in recalled["results"]] == [memory_id]
        got = await call(session, "get_memory", memory_id=memory_id)
        assert got["memory"]["content"] == "Never push to main directly."
        updated = await call(session, "update_memory", memory_id=memory_id, tags=["git"])
        assert updated["memory"]["tags"] == ["git"]
        deleted = await call(session, "delete_memory", memory_id=saved["id"])
        assert deleted == {"status": "success", "id": saved["id"], "deleted": True}
        after = await call(session, "retrieve_context", query="build uv lock file", limit=10)
        assert saved["id"] not in {hit["id"] for hit in after["results"]}

    events = journal_events(project)
    assert [e["type"] for e in events] == ["saved", "saved", "updated", "deleted"]
    assert {e["by"] for e in events} == {STDIO_CLIENT.name}
    assert_clean_stderr(errlog)


async def test_each_error_class_comes_back_as_a_tool_error_over_stdio(project: Path, tmp_path: Path) -> None:
    errlog = tmp_path / "stderr.log"
    async with serve(project, server_env(EVENTMEM_MAX_MEMORY_BYTES="100"), errlog) as session:
        await session.initialize()
        existing = await call(session, "save_context", context_text="Something true.")
        before = journal_files(project)

        unknown = await call_error(session, "get_memory", memory_id="01JZZZZZZZZZZZZZZZZZZZZZZZ")
        assert "no memory with id" in unknown
        invalid = await call_error(session, "store_memory", content="a", importance=3)
        assert "importance: expected a number from 0 to 1, got 3" in invalid
        too_big = await call_error(session, "save_context", context_text="z" * 101)
        assert "max_memory_bytes" in too_big
        missing = await call_error(session, "save_context")
        assert "context_text" in missing
        wrong_type = await call_error(session, "retrieve_context", query="x", limit="plenty")
        assert "limit" in wrong_type
        no_tool = await call_error(session, "no_such_tool")
        assert "no_such_tool" in no_tool

        # the server is still healthy after every error
        got = await call(session, "get_memory", memory_id=existing["id"])
        assert got["memory"]["content"] == "Something true."
    assert journal_files(project) == before
    assert_clean_stderr(errlog)


async def test_the_server_uses_the_project_named_by_eventmem_root(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q", "-b", "main")  # a nearer marker that EVENTMEM_ROOT must win over
    errlog = tmp_path / "stderr.log"
    async with serve(elsewhere, server_env(EVENTMEM_ROOT=str(project)), errlog) as session:
        await session.initialize()
        saved = await call(session, "save_context", context_text="Saved through EVENTMEM_ROOT.")
    assert [e.get("memory") for e in journal_events(project)] == [saved["id"]]
    assert not (elsewhere / ".eventmem").exists()
    assert_clean_stderr(errlog)


async def test_the_server_finds_the_project_from_its_working_directory(project: Path, tmp_path: Path) -> None:
    nested = project / "src" / "pkg"
    nested.mkdir(parents=True)
    assert "EVENTMEM_ROOT" not in os.environ
    errlog = tmp_path / "stderr.log"
    async with serve(nested, server_env(), errlog) as session:
        await session.initialize()
        saved = await call(session, "save_context", context_text="Saved from a subdirectory.")
    assert [e.get("memory") for e in journal_events(project)] == [saved["id"]]
    assert not (nested / ".eventmem").exists()
    assert_clean_stderr(errlog)


async def test_a_second_server_sees_what_the_first_one_saved(project: Path, tmp_path: Path) -> None:
    async with serve(project, server_env(), tmp_path / "first.log") as first:
        await first.initialize()
        saved = await call(first, "save_context", context_text="Shared between two agents.")
        async with serve(project, server_env(), tmp_path / "second.log") as second:
            await second.initialize()
            got = await call(second, "get_memory", memory_id=saved["id"])
            assert got["memory"]["content"] == "Shared between two agents."
            other = await call(second, "save_context", context_text="Written by the second agent.")
        seen = await call(first, "get_memory", memory_id=other["id"])
        assert seen["memory"]["content"] == "Written by the second agent."


# -- a raw JSON-RPC client ------------------------------------------------------------------------


def start_raw(
    processes: ProcessGroup, project: Path, errlog: Path
) -> tuple[subprocess.Popen[bytes], queue.Queue[bytes]]:
    """``eventmem serve`` with pipes; a thread moves each stdout line into the returned queue
    (an empty bytes object marks the end of stdout)."""
    with errlog.open("wb") as stderr:
        proc = processes.spawn(
            eventmem_command("serve"),
            cwd=project,
            env=server_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    lines: queue.Queue[bytes] = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None

    def pump() -> None:
        with stdout:
            for line in iter(stdout.readline, b""):
                lines.put(line)
        lines.put(b"")

    threading.Thread(target=pump, name="stdout-pump", daemon=True).start()
    return proc, lines


def send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def receive(lines: queue.Queue[bytes], seen: list[bytes], request_id: int) -> dict[str, Any]:
    """The response to ``request_id``; every line read on the way is kept in ``seen``."""
    deadline = time.monotonic() + WAIT
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no response to request {request_id} within {WAIT}s"
        line = lines.get(timeout=remaining)
        assert line, f"stdout closed before the response to request {request_id}"
        seen.append(line)
        try:
            message: dict[str, Any] = json.loads(line)
        except ValueError:
            pytest.fail(f"stdout carried a line that is not JSON-RPC: {line!r}")
        if message.get("id") == request_id:
            return message


def result_text(lines: queue.Queue[bytes], seen: list[bytes], request_id: int) -> str:
    """The result of ``request_id`` as JSON text, whether a read before this one already took its line
    (answers to calls sent at once come in any order)."""
    earlier = [message for message in map(json.loads, seen) if message.get("id") == request_id]
    return json.dumps((earlier[0] if earlier else receive(lines, seen, request_id))["result"])


def drain(lines: queue.Queue[bytes], seen: list[bytes]) -> None:
    """Read stdout to its end (the process has exited)."""
    deadline = time.monotonic() + WAIT
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.001))
        if not line:
            return
        seen.append(line)


def initialize_request(client: str) -> dict[str, Any]:
    """The ``initialize`` request (id 1) of a client named ``client``."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client, "version": "0"}},
    }


def initialize(proc: subprocess.Popen[bytes], lines: queue.Queue[bytes], seen: list[bytes]) -> dict[str, Any]:
    send(proc, initialize_request("raw-client"))
    response = receive(lines, seen, 1)
    send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return response


def tool_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def close_and_wait(proc: subprocess.Popen[bytes]) -> int:
    assert proc.stdin is not None
    proc.stdin.close()
    return proc.wait(timeout=WAIT)


def test_the_server_writes_nothing_but_json_rpc_to_stdout(
    project: Path, tmp_path: Path, processes: ProcessGroup
) -> None:
    errlog = tmp_path / "stderr.log"
    proc, lines = start_raw(processes, project, errlog)
    seen: list[bytes] = []
    response = initialize(proc, lines, seen)
    assert response["result"]["serverInfo"]["name"] == "eventmem"
    send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert {tool["name"] for tool in receive(lines, seen, 2)["result"]["tools"]} >= DEFAULT_TOOLS
    send(proc, tool_call(3, "save_context", {"context_text": "Over the wire."}))
    assert receive(lines, seen, 3)["result"]["isError"] is False
    send(proc, tool_call(4, "get_memory", {"memory_id": "nope"}))
    assert receive(lines, seen, 4)["result"]["isError"] is True
    assert close_and_wait(proc) == 0
    drain(lines, seen)

    assert len(seen) >= 4
    for line in seen:
        assert line.endswith(b"\n")
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0", line
        assert "id" in message or "method" in message, line
    assert_clean_stderr(errlog)


def test_a_client_that_writes_its_requests_and_closes_stdin_gets_every_answer(
    project: Path, tmp_path: Path, processes: ProcessGroup
) -> None:
    """As a script piping into ``eventmem serve`` does: the request is still being answered (the
    memory is still opening) when stdin ends, and it is answered before the server exits; one such
    server saves, the next recalls."""

    def piped(call: dict[str, Any], errlog: Path) -> dict[str, Any]:
        proc, lines = start_raw(processes, project, errlog)
        seen: list[bytes] = []
        initialize(proc, lines, seen)
        send(proc, call)
        assert close_and_wait(proc) == 0
        drain(lines, seen)
        (answer,) = [message for message in map(json.loads, seen) if message.get("id") == call["id"]]
        assert_clean_stderr(errlog)
        result: dict[str, Any] = answer["result"]
        return result

    saved = piped(tool_call(2, "save_context", {"context_text": "We deploy with blue-green releases."}), tmp_path / "1")
    assert saved["isError"] is False
    assert [e["type"] for e in journal_events(project)] == ["saved"]
    found = piped(tool_call(2, "retrieve_context", {"query": "how do we deploy"}), tmp_path / "2")
    assert found["isError"] is False and "blue-green" in json.dumps(found)


def test_a_recall_sent_right_after_a_save_without_waiting_finds_it(tmp_path: Path, processes: ProcessGroup) -> None:
    """As a script or a hook does: every line written at once (the handshake, a save, a recall), into
    a new project whose memory is still opening, then on one server pairs of a save and a recall
    sent back to back. The SDK runs each call in a thread of its own; the recall still sees the save
    that arrived before it, every time."""
    for attempt in range(4):
        project = tmp_path / f"project-{attempt}"
        project.mkdir()
        git(project, "init", "-q", "-b", "main")
        proc, lines = start_raw(processes, project, tmp_path / f"stderr-{attempt}.log")
        assert proc.stdin is not None
        messages = [
            initialize_request("piped"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            tool_call(2, "save_context", {"context_text": f"Note {attempt}: the smoke test saved this."}),
            tool_call(3, "retrieve_context", {"query": "smoke test note", "limit": 3}),
        ]
        for word in ("kestrel", "osprey", "merlin"):
            messages.append(tool_call(len(messages) + 1, "store_memory", {"content": f"The {word} runbook is in ops."}))
            messages.append(tool_call(len(messages) + 1, "recall_memories", {"query": f"{word} runbook"}))
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        seen: list[bytes] = []
        assert f"Note {attempt}" in result_text(lines, seen, 3), attempt
        for position, word in ((6, "kestrel"), (8, "osprey"), (10, "merlin")):
            assert f"The {word} runbook" in result_text(lines, seen, position), (attempt, word)
        assert close_and_wait(proc) == 0


def test_a_request_the_sdk_cannot_read_is_answered_with_its_id_and_nothing_is_written(
    project: Path, tmp_path: Path, processes: ProcessGroup
) -> None:
    """A lone surrogate escape is JSON to many writers but not Unicode text: the request is refused in
    one line with its id (it was dropped unanswered, the client left waiting), and the next one works."""
    errlog = tmp_path / "stderr.log"
    proc, lines = start_raw(processes, project, errlog)
    seen: list[bytes] = []
    initialize(proc, lines, seen)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(tool_call(2, "store_memory", {"content": "lone \ud800 half"})).encode() + b"\n")
    proc.stdin.write(b'{"id": 3, "method": "tools/call", "params": {}}\n')  # (no "jsonrpc": "2.0")
    proc.stdin.flush()
    refused = receive(lines, seen, 2)["error"]
    assert refused["code"] == -32600 and "lone surrogate" in refused["message"], refused
    assert "JSON-RPC 2.0" in receive(lines, seen, 3)["error"]["message"]
    assert not (project / ".eventmem" / "journal").exists() or journal_events(project) == []
    send(proc, tool_call(4, "store_memory", {"content": "The next request is read as ever."}))
    assert receive(lines, seen, 4)["result"]["isError"] is False
    assert close_and_wait(proc) == 0
    assert_clean_stderr(errlog)


def test_a_line_nested_deeper_than_any_reader_goes_is_refused_and_the_server_answers_on(
    project: Path, tmp_path: Path, processes: ProcessGroup
) -> None:
    """A hostile client's line of 200,000 nested brackets, bare or as a request's params, ends nothing:
    no id can be read from it, so each is answered as a parse error with a null id, and the next
    request is answered."""
    errlog = tmp_path / "stderr.log"
    proc, lines = start_raw(processes, project, errlog)
    seen: list[bytes] = []
    initialize(proc, lines, seen)
    assert proc.stdin is not None
    deep = b"[" * 200_000
    proc.stdin.write(deep + b"\n")
    proc.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": ' + deep + b"]" * 200_000 + b"}\n")
    proc.stdin.flush()
    send(proc, tool_call(3, "store_memory", {"content": "Saved after the hostile lines."}))
    assert receive(lines, seen, 3)["result"]["isError"] is False
    assert close_and_wait(proc) == 0
    drain(lines, seen)
    refused = [message for message in map(json.loads, seen) if "error" in message and message["id"] is None]
    assert [message["error"]["code"] for message in refused] == [-32700, -32700], refused


def test_a_line_with_no_readable_id_is_answered_with_a_null_id_and_the_session_goes_on(
    project: Path, tmp_path: Path, processes: ProcessGroup
) -> None:
    """JSON-RPC 2.0 answers what it cannot read with ``"id": null``: a line that is not JSON is a parse
    error, an array or an object with no usable id an invalid request. A request whose id can be read
    is refused with it; a blank line and a malformed answer (a reply to nothing we asked) get nothing."""
    errlog = tmp_path / "stderr.log"
    proc, lines = start_raw(processes, project, errlog)
    seen: list[bytes] = []
    initialize(proc, lines, seen)
    assert proc.stdin is not None
    for line in (
        b"this is not json",
        b"",
        b"[1, 2]",
        b'{"jsonrpc": "2.0", "method": 1}',
        b'{"jsonrpc": "2.0", "id": 7, "result": 3, "oops": ',
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": 3}',
        b'{"jsonrpc": "2.0", "id": 99, "error": "not an error object"}',
    ):
        proc.stdin.write(line + b"\n")
    proc.stdin.flush()
    assert receive(lines, seen, 5)["error"]["code"] == -32600
    send(proc, tool_call(6, "store_memory", {"content": "Saved after the unreadable lines."}))
    assert receive(lines, seen, 6)["result"]["isError"] is False
    assert close_and_wait(proc) == 0
    drain(lines, seen)
    answers = [json.loads(line) for line in seen]
    null_ids = [message["error"]["code"] for message in answers if "error" in message and message["id"] is None]
    assert null_ids == [-32700, -32600, -32600, -32700], answers
    assert not any(message.get("id") == 99 for message in answers)
    assert [e["type"] for e in journal_events(project)] == ["saved"]
    assert_clean_stderr(errlog)


def test_closing_stdin_ends_the_server_with_exit_code_0_and_no_lock_held(
    project: Path, tmp_path: Path, processes: ProcessGroup
) -> None:
    errlog = tmp_path / "stderr.log"
    proc, lines = start_raw(processes, project, errlog)
    seen: list[bytes] = []
    initialize(proc, lines, seen)
    send(proc, tool_call(2, "store_memory", {"content": "Written just before the client went away."}))
    assert receive(lines, seen, 2)["result"]["isError"] is False
    lock = project / ".eventmem" / "journal.lock"
    assert lock.exists()

    assert close_and_wait(proc) == 0
    drain(lines, seen)
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError if anything still holds it
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    assert [e["type"] for e in journal_events(project)] == ["saved"]
    assert_clean_stderr(errlog)
