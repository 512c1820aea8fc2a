"""``eventmem hook CLIENT``: one hook event on stdin, the answer in the client's format on stdout.

Never in the way: whatever the input (not JSON, no transcript, a locked journal, a read-only disk),
the hook exits 0 and prints nothing but its answer (or, for a client that wants JSON every time, an
empty object); what went wrong goes to ``.eventmem/cache/hooks/hooks.log``.

Fast: a session start and a prompt are answered from the hooks' index (:mod:`.index`) with the standard
library alone. A missing index is built first (with the whole service, once); a stale one (the journal
changed since) still answers, and a background ``eventmem hooks reindex`` brings it up to date for the
next event. Captures load the service (:mod:`.capture`).
"""

from __future__ import annotations

import json
import os
import sys
import time

from eventmem.adapters.hooks import index as hook_index
from eventmem.adapters.hooks.clients import CLIENTS, Client, answer, client_named
from eventmem.adapters.hooks.local import (
    HooksDir,
    HookSettings,
    find_project_root,
    journal_fingerprint,
    load_hook_settings,
)

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing is not imported at run time: the hook's fast path starts a process per event)
    from pathlib import Path
    from typing import Any, Final


__all__ = ["main"]

MAX_EVENT: Final = 8 * 1024 * 1024
REINDEX_EVERY: Final = 20.0
"""Seconds between two background rebuilds started by hooks (a rebuild at 10k memories takes a few)."""


def main(argv: list[str]) -> int:
    """Run one hook; always 0."""
    client: Client | None = None
    out = ""
    hooks: HooksDir | None = None
    started = time.perf_counter()
    try:
        named = client_named(argv[0]) if argv else None
        if not isinstance(named, Client):
            return 0  # not a client with hooks: nothing to answer, nowhere to log
        client = named
        raw = sys.stdin.buffer.read(MAX_EVENT + 1)
        try:
            event = json.loads(raw[:MAX_EVENT]) if len(raw) <= MAX_EVENT else None
        except ValueError:
            event = None
        roots = event.get("workspace_roots") if isinstance(event, dict) else None
        cwd = event.get("cwd") if isinstance(event, dict) else None
        cwd = cwd or (roots[0] if isinstance(roots, list) and roots else None)
        root = find_project_root(cwd if isinstance(cwd, str) and cwd else None, os.environ)
        if not (root / ".eventmem").is_dir():
            return 0  # no memory here: a hook never starts one (and has nowhere to log)
        hooks = HooksDir(root)
        _stderr_to_log(hooks)
        if not isinstance(event, dict):
            hooks.log(f"{client.name}: the event is not a JSON object ({len(raw)} bytes); nothing done")
            return 0
        out = _handle(client, event, argv[1:], root, hooks)
    except BaseException as exc:  # (SystemExit and KeyboardInterrupt too: the hook must not fail)
        if hooks is not None:
            hooks.log(f"{client.name if client else '?'}: {type(exc).__name__}: {exc}")
    finally:
        if client is not None:
            text = out or answer(client, "", None, "")
            if text:
                try:
                    sys.stdout.write(text + "\n")
                    sys.stdout.flush()
                except (OSError, ValueError):
                    pass
        if hooks is not None and os.environ.get("EVENTMEM_HOOK_TIMING"):
            hooks.log(f"timing {(time.perf_counter() - started) * 1000:.1f} ms")
    return 0


def _stderr_to_log(hooks: HooksDir) -> None:
    """Send what would reach stderr (a library's warning, a log record with no handler) to the hooks'
    log, else nowhere: a client may show a hook's stderr to the user or the model."""
    try:
        hooks.ensure_cache()
        fd = os.open(hooks.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        try:
            fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            return
    try:
        sys.stderr.flush()
        os.dup2(fd, 2)
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)


def _handle(client: Client, event: dict[str, Any], extra: list[str], root: Path, hooks: HooksDir) -> str:
    name = str(event.get("hook_event_name") or event.get("hookEventName") or (extra[0] if extra else ""))
    settings, problems = load_hook_settings(root, os.environ)
    for problem in problems:
        hooks.log(f"settings: {problem}")
    action = client.event_action(name)
    session = str(event.get("session_id") or event.get("conversation_id") or event.get("sessionId") or "unknown")
    if action == "start":
        return answer(client, name, action, _start(root, hooks, client, session, event, settings))
    if action == "prompt":
        prompt = event.get("prompt") or event.get("user_prompt") or ""
        return answer(client, name, action, _prompt(root, hooks, client, session, str(prompt), settings))
    if action == "capture":
        if settings.auto_capture == "off":
            hooks.log(f"capture {client.name}@{session} {name}: auto_capture is off")
            return answer(client, name, action, "")
        from eventmem.adapters.hooks.capture import capture  # the service: only here

        _deadline("capture")
        hooks.log(capture(root, client.name, name, event, settings, hooks))
        return answer(client, name, action, "")
    if action == "tool" and settings.post_tool_use:
        _note_tool(hooks, client, session, event)
    elif action is None:
        hooks.log(f"{client.name}: event {name[:80]!r} is not one eventmem answers")
    return answer(client, name, action, "")


DEADLINES: Final = {"start": 25, "prompt": 25, "capture": 50, "tool": 10}
"""Seconds a hook may take before it gives up (a journal locked by another process, a huge first index),
below the timeouts ``eventmem hooks install`` sets; ``EVENTMEM_HOOK_DEADLINE`` overrides them."""


class HookDeadline(Exception):
    """The hook ran out of time; it exits 0 and says so in its log."""


def _deadline(action: str | None) -> None:
    """Give up after the action's time (a capture, or building a missing index: the slow ways)."""
    import signal

    seconds = DEADLINES.get(action or "", 10)
    override = os.environ.get("EVENTMEM_HOOK_DEADLINE", "").strip()
    if override.isdigit() and int(override) > 0:
        seconds = int(override)

    def expire(signum: int, frame: object) -> None:
        raise HookDeadline(f"gave up after {seconds} s (is another process holding the journal lock?)")

    signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)


def _index(root: Path, hooks: HooksDir) -> Any:
    """The hooks' index: built now when missing, refreshed in the background when stale."""
    connection = hook_index.open_index(hooks.index_file)
    if connection is None:
        from eventmem.adapters.hooks.capture import rebuild_index

        _deadline("start")
        hooks.ensure_cache()
        rebuild_index(root)
        return hook_index.open_index(hooks.index_file)
    if hook_index.fingerprint_of(connection) != journal_fingerprint(root):
        _reindex_in_background(root, hooks)
    return connection


def _reindex_in_background(root: Path, hooks: HooksDir) -> None:
    marker = hooks.cache / "reindex.started"
    try:
        if time.time() - marker.stat().st_mtime < REINDEX_EVERY:
            return
    except OSError:
        pass
    import subprocess

    try:
        marker.touch()
        subprocess.Popen(
            [sys.executable, "-m", "eventmem", "hooks", "reindex", "--root", str(root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        hooks.log(f"reindex: cannot start: {exc}")


def _session_state(hooks: HooksDir, client: Client, session: str) -> dict[str, Any]:
    state = hooks.read_state(client.name, session)
    if not isinstance(state.get("injected"), list):
        state["injected"] = []
    return state


def _remember_injected(hooks: HooksDir, client: Client, session: str, state: dict[str, Any], ids: list[str]) -> None:
    if not ids:
        return
    state["injected"] = [*state["injected"], *ids][-2000:]
    try:
        hooks.write_state(client.name, session, state)
    except OSError as exc:
        hooks.log(f"session state: {exc}")


def _pending_preface(hooks: HooksDir) -> list[str]:
    """The bundle's first lines when captures wait for a yes (``auto_capture = "suggest"``)."""
    try:
        lines = hooks.pending_file.read_bytes().splitlines()[:500]
    except OSError:
        return []
    items = []
    for line in lines:
        try:
            item = json.loads(line).get("item", {})
        except (ValueError, AttributeError):
            continue
        if isinstance(item, dict):
            items.append(f"  - [{item.get('kind', '?')}] {' '.join(str(item.get('content', '')).split())[:160]}")
    if not items:
        return []
    return [
        f"## Waiting for confirmation: {len(items)} memories captured from earlier sessions (auto_capture = suggest)",
        "Ask the user whether to keep them: `eventmem hooks pending --accept` saves them all, "
        "`eventmem hooks pending --discard` drops them.",
        *items[:8],
    ]


def _start(
    root: Path, hooks: HooksDir, client: Client, session: str, event: dict[str, Any], settings: HookSettings
) -> str:
    connection = _index(root, hooks)
    if connection is None:
        return ""
    state = _session_state(hooks, client, session)
    if event.get("source") in ("clear", "compact"):  # the context the earlier injections were in is gone
        state["injected"] = []
    with connection:
        text, ids = hook_index.bundle(
            connection,
            project=root.name,
            budget_tokens=settings.session_budget_tokens,
            exclude=state["injected"],
            preface=_pending_preface(hooks),
        )
    connection.close()
    _remember_injected(hooks, client, session, state, ids)
    return text


def _prompt(root: Path, hooks: HooksDir, client: Client, session: str, prompt: str, settings: HookSettings) -> str:
    if not prompt.strip() or settings.prompt_items == 0:
        return ""
    connection = _index(root, hooks)
    if connection is None:
        return ""
    state = _session_state(hooks, client, session)
    text, ids = hook_index.relevant(
        connection,
        prompt,
        floor=settings.relevance_floor,
        limit=settings.prompt_items,
        budget_tokens=settings.prompt_budget_tokens,
        exclude=state["injected"],
    )
    connection.close()
    _remember_injected(hooks, client, session, state, ids)
    return text


def _note_tool(hooks: HooksDir, client: Client, session: str, event: dict[str, Any]) -> None:
    """PostToolUse (when ``post_tool_use = true``): note a failing command in the session's state; the
    next capture pairs it with what fixed it."""
    response = event.get("tool_response") or event.get("tool_output") or {}
    failed = isinstance(response, dict) and (
        response.get("is_error") is True
        or response.get("success") is False
        or bool(response.get("error"))
        or (isinstance(response.get("exit_code"), int) and response["exit_code"] != 0)
    )
    if not failed:
        return
    state = _session_state(hooks, client, session)
    found = state.get("tool_failures")
    notes: list[Any] = found if isinstance(found, list) else []
    given = event.get("tool_input")
    tool_input: dict[str, Any] = given if isinstance(given, dict) else {}
    notes.append({"tool": str(event.get("tool_name", ""))[:80], "command": str(tool_input.get("command", ""))[:300]})
    state["tool_failures"] = notes[-50:]
    hooks.write_state(client.name, session, state)


def known_clients() -> list[str]:
    return sorted(CLIENTS)
