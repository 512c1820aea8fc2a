"""The hooks' slow path, with the whole service: a capture at the end of a turn or a session, and the
rebuild of the hooks' index.

A capture reads the transcript from where this session's last capture ended, removes secrets and
``<private>`` spans from every turn, finds the decisions, fixes, todos, the current task and (at the end
of a session or before a compaction) a summary of the conversation, and, with ``auto_capture = "on"``,
saves them through the service as one batch by the writer ``hook:CLIENT@SESSION``; with ``"suggest"``
they wait in ``.eventmem/local/hooks/pending.jsonl`` until ``eventmem hooks pending --accept``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Final

from eventmem.adapters.hooks import index as hook_index
from eventmem.adapters.hooks.extract import Extracted, Item, extract
from eventmem.adapters.hooks.local import HooksDir, HookSettings, journal_fingerprint, safe_name
from eventmem.adapters.hooks.transcript import read_turns
from eventmem.core.redact import PRIVATE, scrub
from eventmem.core.summarizer import ExtractiveSummarizer, Summarizer

TYPE_CHECKING = False
if TYPE_CHECKING:  # the service (numpy, FAISS) is imported only when a capture has something to save
    from eventmem.service import MemoryService

__all__ = ["capture", "open_project", "rebuild_index", "writer_of"]

FINAL_EVENTS: Final = frozenset({"sessionend", "precompact", "precompress"})
"""Events after which the conversation (or its context) is over: a summary is written."""
DAY: Final = 86400
TTL: Final = {"summary": 30 * DAY, "current_task": 14 * DAY, "todo": 60 * DAY}
"""Hook memories that age: a summary, the current task and a todo expire unless used (promoted) or kept."""


def writer_of(client: str, session: str) -> str:
    return f"hook:{safe_name(client, 20)}@{safe_name(session, 60)}"


def open_project(root: Path) -> MemoryService:
    from eventmem.journal.project import RootChoice
    from eventmem.service import open_service

    return open_service(RootChoice(root, "hook"))


def rebuild_index(root: Path, service: MemoryService | None = None) -> int:
    """Write the hooks' index of the project at ``root`` (opening the service if not given)."""
    fingerprint = journal_fingerprint(root)  # before reading: a write meanwhile leaves it stale, not wrong
    own = service is None
    service = service or open_project(root)
    try:
        rows = service.memory_rows()
    finally:
        if own:
            service.close()
    return hook_index.build(HooksDir(root).index_file, rows, fingerprint)


def _scrubbed(text: str) -> str:
    return scrub(text, refuse=False, field="transcript") if text else text


def _without_private(text: str) -> str:
    """``text`` without its ``<private>`` spans, before any rule reads it (secrets are scrubbed from what
    the rules find: scrubbing every turn of a long transcript costs seconds)."""
    return PRIVATE.sub("", text) if "private" in text.lower() else text


def capture(
    root: Path, client: str, event_name: str, event: dict[str, Any], settings: HookSettings, hooks: HooksDir
) -> str:
    """Capture what the session's transcript added since its last capture; returns a line for the log."""
    session = str(event.get("session_id") or event.get("conversation_id") or event.get("sessionId") or "unknown")
    transcript = event.get("transcript_path") or event.get("transcriptPath") or ""
    final = event_name.lower() in FINAL_EVENTS
    with hooks.session_lock(client, session):
        state = hooks.read_state(client, session)
        if not isinstance(transcript, str) or not transcript or not Path(transcript).is_file():
            return f"capture {client}@{session}: no transcript to read ({str(transcript)[:200]!r})"
        same = state.get("transcript") == transcript
        position = state.get("position", 0) if same and isinstance(state.get("position"), int) else 0
        reading = read_turns(Path(transcript), position, str(state.get("format", "")) if same else "")
        for turn in reading.turns:
            turn.text = _without_private(turn.text)
        found = extract(reading.turns, root)
        found.items = [
            Item(item.kind, _scrubbed(item.content), _scrubbed(item.title), item.tags, item.importance)
            for item in found.items
        ]
        found.prompts = [_scrubbed(prompt) for prompt in found.prompts[:5]] + found.prompts[5:]
        found.files = [_scrubbed(path) for path in found.files[:50]]
        found.assistant_text = [_scrubbed(" ".join(found.assistant_text)[-6000:])]
        digest = _digest(state.get("digest"), found)
        noted = state.pop("tool_failures", None)  # PostToolUse's notes (post_tool_use = true)
        if isinstance(noted, list):
            failed = [f"{n.get('command') or n.get('tool')}" for n in noted if isinstance(n, dict)]
            digest["failed_commands"] = [*digest.get("failed_commands", []), *map(_scrubbed, failed)][-10:]
        items = list(found.items)
        if digest["prompts"] and not state.get("task_written"):
            task = digest["prompts"][0]
            items.append(
                Item(
                    "task",
                    f"Current task (session {session[:12]}): {task}",
                    title="Current task",
                    tags=("current-task",),
                )
            )
        service: MemoryService | None = None
        written = 0
        try:
            if items and settings.auto_capture == "on":
                service = open_project(root)
            if final and (digest["prompt_count"] or digest["files"]):
                summarizer = service.summarizer if service is not None else ExtractiveSummarizer()
                items.append(_summary(root, session, client, digest, summarizer))
            batch = [_batch_item(item, session, client) for item in items]
            if batch and settings.auto_capture == "on":
                service = service or open_project(root)
                from eventmem.service.batches import items_from

                saved = service.save_batch(items_from(batch), by=writer_of(client, session))
                written = sum(1 for one in saved if not one.deduplicated)
            elif batch and settings.auto_capture == "suggest":
                _suggest(hooks, batch, writer_of(client, session))
            state.update(
                transcript=transcript,
                position=reading.position,
                format=reading.kind,
                digest=digest,
                task_written=bool(state.get("task_written") or any(item.kind == "task" for item in items)),
            )
            hooks.write_state(client, session, state)
            if service is not None:
                rebuild_index(root, service)
        finally:
            if service is not None:
                service.close()
    note = f"; {reading.note}" if reading.note else ""
    skipped = f"; {reading.skipped} lines skipped (not JSON or not a turn)" if reading.skipped else ""
    return (
        f"capture {client}@{session} {event_name}: {len(reading.turns)} turns, {len(batch)} items, "
        f"{written} written ({settings.auto_capture}){skipped}{note}"
    )


def _digest(previous: Any, found: Extracted) -> dict[str, Any]:
    """What the session did so far, kept in its state between captures (for the summary)."""
    digest: dict[str, Any] = previous if isinstance(previous, dict) else {}
    prompts = [p for p in digest.get("prompts", []) if isinstance(p, str)]
    prompts += found.prompts[: max(0, 5 - len(prompts))]
    files = [f for f in digest.get("files", []) if isinstance(f, str)]
    files += [f for f in found.files if f not in files]
    decisions = [d for d in digest.get("decisions", []) if isinstance(d, str)]
    decisions += [item.title for item in found.items if item.kind == "decision"]
    return {
        "prompts": prompts[:5],
        "prompt_count": int(digest.get("prompt_count", 0) or 0) + len(found.prompts),
        "files": files[:50],
        "decisions": decisions[:10],
        "errors": int(digest.get("errors", 0) or 0) + found.errors,
        "failed_commands": [c for c in digest.get("failed_commands", []) if isinstance(c, str)][-10:],
        "recent": " ".join(found.assistant_text)[-6000:] or str(digest.get("recent", "")),
    }


def _summary(root: Path, session: str, client: str, digest: dict[str, Any], summarizer: Summarizer) -> Item:
    """The conversation's summary: what was asked, decided and changed, and the assistant's last words
    summarised by the project's summarizer (the configured one)."""
    lines = [f"Conversation summary ({client}, session {session[:12]}): {digest['prompt_count']} prompts."]
    if digest["prompts"]:
        lines.append("Asked: " + " | ".join(p[:160] for p in digest["prompts"][:3]))
    if digest["decisions"]:
        lines.append("Decided: " + "; ".join(digest["decisions"][:5]))
    if digest["files"]:
        lines.append("Files changed: " + ", ".join(digest["files"][:15]))
    stat = _git_shortstat(root)
    if stat:
        lines.append(f"Working tree: {stat}")
    if digest["errors"]:
        lines.append(f"Failed tool calls: {digest['errors']}")
    if digest.get("failed_commands"):
        lines.append("Commands that failed: " + "; ".join(str(c)[:120] for c in digest["failed_commands"]))
    recent = digest.get("recent") or ""
    if recent.strip():
        lines.append("Last: " + summarizer.summarize([recent])[0])
    return Item(
        "general", "\n".join(lines), title="Conversation summary", tags=("conversation-summary",), importance=0.4
    )


def _git_shortstat(root: Path) -> str:
    if not (root / ".git").exists():
        return ""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "diff", "--shortstat", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _batch_item(item: Item, session: str, client: str) -> dict[str, Any]:
    ttl = None
    if "conversation-summary" in item.tags:
        ttl = TTL["summary"]
    elif item.kind == "task":
        ttl = TTL["current_task"]
    elif item.kind == "todo":
        ttl = TTL["todo"]
    return {
        "content": item.content,
        "title": item.title,
        "tags": ["hook", *item.tags],
        "kind": item.kind,
        "importance": item.importance,
        "ttl_seconds": ttl,
        "metadata": {"hook_client": client, "hook_session": session[:120]},
        "source": f"hook:{client}",
    }


def _suggest(hooks: HooksDir, batch: list[dict[str, Any]], by: str) -> None:
    """Add ``batch`` (scrubbed already) to the pending file (``auto_capture = "suggest"``)."""
    path = hooks.pending_file
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = b"".join(json.dumps({"by": by, "item": item}).encode() + b"\n" for item in batch)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, lines)
    finally:
        os.close(fd)
