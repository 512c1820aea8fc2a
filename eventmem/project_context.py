"""The shared project-memory protocol on the journal: sections in, events out, ``.ai/`` files as a view.

:class:`ProjectContext` is a thin layer over :class:`~eventmem.service.MemoryService`: every change
is a command of the service (so an event on the journal), every read folds the journal first. The
rendering, parsing and planning are pure functions in :mod:`eventmem.pmp`; what is here is the IO:
reading the fold, appending, writing the view files, reading an ``.ai/`` directory.

Size guard: a list section (decisions, recent changes, conversation summaries, todo) has a limit
(``section_max_bytes``, 256 KB by default). A write that would take it over is *paused*: nothing is
written, and the result carries the optimization plan. Applying the plan trims any section above
75% of its limit to 50% (archiving its oldest entries), so the same write then fits, as long as one
call adds at most a quarter of the limit to a section (a larger addition is refused outright).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from eventmem.errors import InvalidInput, LimitExceeded, UnsafePath
from eventmem.events import MemoryRestored
from eventmem.files import FileLock, atomic_write
from eventmem.ids import new_id, now_iso
from eventmem.lifecycle import archive_memories
from eventmem.pmp import (
    SECTIONS,
    Entry,
    ParsedSection,
    Plan,
    Section,
    dedupe_key,
    entry_key,
    import_id,
    is_placeholder,
    normalize_singleton,
    parse_section,
    plan_optimization,
    render_entry,
    render_section,
    section_bytes,
    section_named,
    summarize_section,
)
from eventmem.service import MemoryService
from eventmem.state import State
from eventmem.views import live_ids
from eventmem.worktree import changes

__all__ = ["IMPORT_BY", "ProjectContext", "archive_entries"]

log = logging.getLogger("eventmem.project_context")

IMPORT_BY: Final = "import:pmp"
SECTION_IMPORTANCE: Final = 0.8
VIEW_MEMO: Final = "ai-view.json"
_BY_KEY: Final = {section.key: section for section in SECTIONS}
_LIST_KINDS: Final = {section.kind: section for section in SECTIONS if not section.singleton}
_SCAN_BATCH: Final = 256
_SINGLETON_IDS: Final = {section.memory_id: section for section in SECTIONS if section.singleton}
_LEADING_DATE = re.compile(r"^\s*\d{4}-\d{2}-\d{2}\b")
_DECISION_HINT = re.compile(
    r"\b(?:decided|decision|we chose|chose to|switched to|agreed|will use|going with|opted)\b", re.I
)
_TODO_HINT = re.compile(r"\b(?:todo|to do|next step|follow[- ]?up|still need|remaining work|not yet done)\b", re.I)
_DONE_HINT = re.compile(r"\b(?:done|finished|completed|shipped|merged)\b", re.I)

Mode = Literal["replace", "append"]


def section_of(name: str) -> Section:
    section = section_named(name)
    if section is None:
        names = ", ".join(s.key for s in SECTIONS)
        raise InvalidInput(f"unknown section {name!r}; choose one of: {names}")
    return section


def is_section_memory(memory_id: str, kind: str) -> bool:
    return memory_id in _SINGLETON_IDS or kind in _LIST_KINDS


def _today() -> str:
    return now_iso()[:10]


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _dated(text: str) -> str:
    text = text.strip()
    return text if _LEADING_DATE.match(text) else f"{_today()}: {text}"


def _first_sentence(text: str, limit: int = 80) -> str:
    line = text.strip().split("\n", 1)[0]
    sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def archive_entries(service: MemoryService, ids: Sequence[str], *, reason: str, by: str = "") -> dict[str, Any]:
    """Archive project-context entries: each is deleted (a tombstone saying why, so it leaves the
    view) and its history is then moved out of the live journal into ``archive/`` segments by the
    lifecycle's compaction, one segment per month the entries were created in. The one function the
    optimization's archiving goes through."""
    if not ids:
        return {"archived": 0, "segments": []}
    store = service.project
    months: dict[str, list[str]] = {}
    for memory_id in ids:
        with store.read() as view:
            record = view.record(memory_id)
        months.setdefault(record.created_at[:7] if record else "", []).append(memory_id)
        service.delete(memory_id, reason=f"archived: {reason}", by=by)
    segments: list[str] = []
    for month in sorted(months):
        result = archive_memories(store, _chooser(months[month]), now=time.time(), by=by)
        if result.segment:
            segments.append(result.segment)
    return {"archived": len(ids), "segments": segments}


def _chooser(ids: Sequence[str]) -> Callable[[State], Iterable[str]]:
    chosen = frozenset(ids)
    return lambda _state: chosen


class ProjectContext:
    """The protocol's commands and queries over one service. ``by`` names the writer (the MCP
    client, ``cli``, or :data:`IMPORT_BY`)."""

    def __init__(self, service: MemoryService, *, by: str = "") -> None:
        self.service = service
        self.store = service.project
        self.paths = service.project.paths
        self.config = service.config
        self.by = by
        self.view_dir()  # a render folder that is a link is refused before anything is written

    # -- reading ------------------------------------------------------------------------------

    def sections(self) -> dict[str, list[Entry]]:
        """Every section's live entries, list entries in created order.

        The store's lock is taken a batch of memories at a time, so that a large project's view is
        read without holding up the calls that come in meanwhile."""
        self.store.catch_up()
        out: dict[str, list[tuple[str, Entry]]] = {section.key: [] for section in SECTIONS}
        store = self.store
        with store.read() as view:  # picked from the columns: only these memories are read (and decoded)
            candidates = live_ids(view, kinds=_LIST_KINDS, ids=_SINGLETON_IDS)
        for start in range(0, len(candidates), _SCAN_BATCH):
            with store.read() as view:
                for memory_id in candidates[start : start + _SCAN_BATCH]:
                    record = view.visible(memory_id)
                    if record is None:
                        continue
                    singleton = _SINGLETON_IDS.get(record.id)
                    section = singleton or _LIST_KINDS.get(record.kind)
                    if section is None or (section.singleton and singleton is None):
                        continue
                    entry = Entry(
                        id=record.id,
                        title=record.title if not section.singleton else "",
                        content=record.content,
                        summary=record.summary,
                        created_at=record.created_at,
                        updated_at=record.updated_at or record.created_at,
                        updated_by=record.updated_by,
                    )
                    out[section.key].append((record.created_stamp, entry))
        return {key: [entry for _, entry in sorted(items, key=lambda item: item[0])] for key, items in out.items()}

    @property
    def limit(self) -> int:
        return self.config.section_max_bytes

    def plan(self, sections: Mapping[str, Sequence[Entry]] | None = None) -> Plan:
        return plan_optimization(self.sections() if sections is None else sections, limit=self.limit)

    # -- the view -----------------------------------------------------------------------------

    @property
    def view_tracked(self) -> bool:
        return bool(self.config.render_ai_dir.strip())

    def view_dir(self) -> Path:
        """Where the ``.ai/`` files are rendered: ``.eventmem/cache/ai/`` unless ``render_ai_dir``
        names a folder of the project (``.ai`` for a tracked view)."""
        setting = self.config.render_ai_dir.strip()
        if not setting:
            return self.paths.inside(self.paths.cache_dir / "ai", kind="folder")
        path = Path(setting)
        if path.is_absolute() or ".." in path.parts:
            raise InvalidInput(f"render_ai_dir must be a folder inside the project, such as '.ai', not {setting!r}")
        if path.parts and path.parts[0].lower() in (".git", self.paths.base.name):
            # (git's own folder, or the journal's: a tracked setting must not write files there)
            raise InvalidInput(
                f"render_ai_dir must be a folder of the project outside .git and .eventmem, not {setting!r}"
            )
        return self.paths.inside(self.paths.root / path, kind="folder")

    def relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.paths.root).as_posix()
        except ValueError:
            return str(path)

    def render_view(self) -> dict[str, Any]:
        """Write the eight files (atomically, only those that changed). In a tracked folder a file
        that someone edited since eventmem wrote it is left alone and reported in ``skipped``
        (``eventmem import pmp`` takes the edit in); a file with merge-conflict markers is replaced.

        The journal is folded under the view's lock, so of two processes (or threads) rendering at
        once the later one writes what the later journal says: a view is never left older than it."""
        directory = self.view_dir()
        if not self.paths.journal_dir.is_dir():  # nothing saved yet: leave the project untouched
            texts = self._texts(self.sections())
            return {"dir": self.relative(directory), "written": [], "skipped": [], "files": texts}
        written: list[str] = []
        skipped: list[str] = []
        self.paths.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.paths.cache_dir / "ai-view.lock").hold():
            texts = self._texts(self.sections())
            memo = self._load_memo() if self.view_tracked else {}
            before = dict(memo)
            for name, text in texts.items():
                path = self.paths.inside(directory / name)
                data = text.encode("utf-8")
                try:
                    current: bytes | None = path.read_bytes()
                except FileNotFoundError:
                    current = None
                if current == data:
                    memo[name] = _sha(data)
                    continue
                if (
                    self.view_tracked
                    and current is not None
                    and memo.get(name) != _sha(current)
                    and b"<<<<<<< " not in current
                ):
                    skipped.append(name)
                    continue
                atomic_write(path, data, durable=False)
                memo[name] = _sha(data)
                written.append(name)
            if self.view_tracked and memo != before:
                self._save_memo(memo)
        if skipped:
            log.warning("left %s alone: edited by hand (run `eventmem import pmp` to take the edits in)", skipped)
        return {
            "dir": self.relative(directory),
            "written": written,
            "skipped": skipped,
            "files": texts,
        }

    @staticmethod
    def _texts(sections: Mapping[str, Sequence[Entry]]) -> dict[str, str]:
        return {section.file: render_section(section, sections.get(section.key, ())) for section in SECTIONS}

    def _load_memo(self) -> dict[str, str]:
        try:
            data = json.loads((self.paths.cache_dir / VIEW_MEMO).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("dir") != self.relative(self.view_dir()):
            return {}
        files = data.get("files", {})
        return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}

    def _save_memo(self, memo: Mapping[str, str]) -> None:
        payload = {"dir": self.relative(self.view_dir()), "files": dict(sorted(memo.items()))}
        atomic_write(self.paths.cache_dir / VIEW_MEMO, json.dumps(payload, indent=1).encode(), durable=False)

    def _adopt(self, directory: Path) -> None:
        """After an import of the tracked view folder itself: its files may be re-rendered."""
        if not self.view_tracked or directory.resolve() != self.view_dir().resolve():
            return
        self.paths.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.paths.cache_dir / "ai-view.lock").hold():
            memo = self._load_memo()
            for section in SECTIONS:
                path = directory / section.file
                if path.is_file():
                    memo[section.file] = _sha(path.read_bytes())
            self._save_memo(memo)

    def file_of(self, section: Section) -> str:
        return self.relative(self.view_dir() / section.file)

    def _adopt_current(self) -> None:
        """Before a write to a tracked view: a file that holds what the journal renders now is
        eventmem's, whatever the memo says (a fresh clone, or a cleared cache, has no memo), so the
        write's render replaces it. A file that differs is still left alone."""
        if not self.view_tracked or not self.paths.journal_dir.is_dir():
            return
        try:
            self._adopt_matching(self.view_dir())
        except (InvalidInput, OSError) as exc:  # the write goes on; its answer says why the view was not rendered
            log.warning("could not look at the .ai view before a write: %s", exc)

    def _adopt_matching(self, directory: Path) -> None:
        self.paths.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.paths.cache_dir / "ai-view.lock").hold():
            memo = self._load_memo()
            before = dict(memo)
            for name, text in self._texts(self.sections()).items():
                data = text.encode("utf-8")
                try:
                    if (directory / name).read_bytes() == data:
                        memo[name] = _sha(data)
                except OSError:
                    continue
            if memo != before:
                self._save_memo(memo)

    def _rendered(self, section: Section) -> dict[str, Any]:
        """Render the view after a write and say whether ``section``'s file now holds it. The write
        is in the journal either way: a view that cannot be written is reported, not raised."""
        try:
            view = self.render_view()
        except (InvalidInput, OSError) as exc:
            return {
                "file": section.file,
                "fileWritten": False,
                "fileNote": f"the change is saved, but the .ai view was not rendered: {exc}",
            }
        if section.file not in view["skipped"]:
            return {"file": self.file_of(section), "fileWritten": True}
        return {
            "file": self.file_of(section),
            "fileWritten": False,
            "fileNote": (
                f"{self.file_of(section)} was left alone: it was edited by hand since eventmem last wrote it. "
                f"The change is saved; run `eventmem import pmp {view['dir']}` to take the hand edit in (then the "
                "file is rendered again), or delete the file to have it rendered from memory."
            ),
        }

    # -- writing ------------------------------------------------------------------------------

    def _write_singleton(self, section: Section, content: str, *, mode: Mode = "replace") -> tuple[str, str]:
        """Replace (or append to) a singleton section; returns (previous, new) content."""
        text = normalize_singleton(section, content)
        if not text:
            raise InvalidInput(f"{section.key} must not be empty")
        self.store.catch_up()
        with self.store.read() as view:
            record = view.record(section.memory_id)
        live = record is not None and record.exists and record.status == "live"
        previous = record.content if record is not None and live else ""
        if mode == "append" and previous and not is_placeholder(previous):
            text = f"{previous}\n\n{text}"
        size = section_bytes(section, [Entry(section.memory_id, "", text)])
        if size > self.limit:
            raise LimitExceeded(
                f"{section.key} would be {size} bytes; its limit is {self.limit} bytes (section_max_bytes). "
                "Keep the essential part; details belong in the repository."
            )
        if record is None or not record.exists:
            self.service.save(
                text,
                title=section.title,
                kind=section.kind,
                importance=SECTION_IMPORTANCE,
                by=self.by,
                memory_id=section.memory_id,
            )
        else:
            if not live:
                restored = MemoryRestored(
                    id=new_id(),
                    ts=now_iso(),
                    by=self.by,
                    prev=record.head,
                    memory=section.memory_id,
                    reason="section written again",
                )
                self.store.append([restored])
            self.service.update(section.memory_id, content=text, by=self.by)
        return previous, text

    def _guard(self, pending: Mapping[str, Sequence[Entry]]) -> dict[str, Any] | None:
        """``None`` when the new entries fit their sections; else the paused result (nothing written)."""
        if not any(pending.values()):
            return None
        sections = self.sections()
        over: list[dict[str, Any]] = []
        for key, new in pending.items():
            if not new:
                continue
            section = _BY_KEY[key]
            before = section_bytes(section, sections[key])
            after = section_bytes(section, [*sections[key], *new])
            if after - before > self.limit // 4:
                raise LimitExceeded(
                    f"this call adds {after - before} bytes to {key}, more than a quarter of its limit of "
                    f"{self.limit} bytes (section_max_bytes): shorten it, or split it across calls"
                )
            if after > self.limit:
                over.append({"section": key, "file": section.file, "sizeBytes": after, "limitBytes": self.limit})
        if not over:
            return None
        plan = self.plan(sections)
        names = ", ".join(f"{o['section']} ({o['sizeBytes']} bytes)" for o in over)
        return {
            "status": "paused",
            "written": False,
            "over": over,
            "message": (
                f"Nothing was written: {names} would go over the section limit of {self.limit} bytes. "
                "Run apply_memory_optimization (it archives the oldest entries; their history stays in "
                "the journal's archive), then repeat this call."
            ),
            "optimizationPlan": plan.to_dict(),
        }

    def _add(self, section: Section, entry: Entry, *, memory_id: str | None = None) -> str:
        """Append one entry to a list section. It always gets its own id: a section is a dated log,
        so the service's save-time dedup (which would hand back any live memory with the same text,
        of any kind) does not apply; duplicates within a section are the optimization's job."""
        content, title = entry.content.strip(), entry.title.strip()
        if not content:
            content, title = title, ""
        memory = self.service.save(
            content,
            title=title if len(title) <= 200 else title[:199] + "…",
            kind=section.kind,
            by=self.by,
            memory_id=memory_id or new_id(),
        )
        return memory.id

    def _decision_entry(self, decision: str, *, title: str | None = None, rationale: str | None = None) -> Entry:
        if not isinstance(decision, str) or not decision.strip():
            raise InvalidInput("decision must not be empty")
        content = decision.strip()
        if rationale and rationale.strip():
            content += f"\n\nRationale: {rationale.strip()}"
        label = (title or "").strip() or _first_sentence(decision)
        return Entry("", f"{_today()} — {label}", content)

    def _summary_entry(self, summary: str, title: str | None) -> Entry:
        if not isinstance(summary, str) or not summary.strip():
            raise InvalidInput("summary must not be empty")
        label = _stamp() + (f" — {title.strip()}" if title and title.strip() else "")
        return Entry("", label, summary.strip())

    @staticmethod
    def _change_entries(changes: Sequence[str] | None) -> list[Entry]:
        return [Entry("", "", _dated(change)) for change in changes or () if change and change.strip()]

    # -- tools: reading -----------------------------------------------------------------------

    def bootstrap(self) -> dict[str, Any]:
        """Core sections in full, the others summarized, the files to read next and the warnings."""
        sections = self.sections()
        self.render_view()
        core: dict[str, str] = {}
        supplemental: dict[str, Any] = {}
        recommended: list[str] = []
        for section in SECTIONS:
            entries = sections[section.key]
            if section.core:
                core[section.key] = entries[0].content if entries else ""
                continue
            brief = summarize_section(section, entries)
            brief["file"] = self.file_of(section)
            supplemental[section.key] = brief
            if brief["omitted"] and (self.view_dir() / section.file).exists():
                recommended.append(brief["file"])
        return {
            "status": "success",
            "projectRoot": str(self.paths.root),
            "coreContext": core,
            "supplementalContext": supplemental,
            "recommendedNextFiles": recommended,
            "warnings": self.warnings(sections),
        }

    def warnings(self, sections: Mapping[str, Sequence[Entry]]) -> list[str]:
        out: list[str] = []
        for section in SECTIONS:
            if not section.singleton:
                continue
            entries = sections.get(section.key, ())
            tool = "update_current_task" if section.key == "currentTask" else "update_context_section"
            if not entries:
                out.append(f"{section.key} ({section.file}) is missing: write {section.hint} ({tool}).")
            elif is_placeholder(entries[0].content):
                out.append(f"{section.key} ({section.file}) is still a placeholder: write {section.hint} ({tool}).")
        out += self.service.warnings()
        return out

    def full(self) -> dict[str, Any]:
        sections = self.sections()
        self.render_view()
        return {
            "status": "success",
            "projectRoot": str(self.paths.root),
            "sections": {s.key: render_section(s, sections[s.key]) for s in SECTIONS},
            "files": {s.key: self.file_of(s) for s in SECTIONS},
            "warnings": self.warnings(sections),
        }

    def current_task(self) -> dict[str, Any]:
        section = _BY_KEY["currentTask"]
        entries = self.sections()["currentTask"]
        entry = entries[0] if entries else None
        content = entry.content if entry else ""
        return {
            "status": "success",
            "currentTask": content,
            "isPlaceholder": is_placeholder(content),
            "updatedAt": entry.updated_at if entry else None,
            "updatedBy": entry.updated_by if entry else None,
            "file": self.file_of(section),
        }

    def effective_root(self) -> dict[str, Any]:
        root = self.service.root
        return {
            "status": "success",
            "projectRoot": str(root.root),
            "memoryRoot": str(self.paths.base),
            "projectRootSource": root.source,
            "viewDir": str(self.view_dir()),
            "viewTracked": self.view_tracked,
        }

    # -- tools: writing -----------------------------------------------------------------------

    def write_section(
        self, name: str, content: str, *, mode: Mode = "replace", title: str | None = None
    ) -> dict[str, Any]:
        """Replace or append to a singleton section; append an entry to a list section."""
        section = section_of(name)
        if mode not in ("replace", "append"):
            raise InvalidInput("mode must be 'replace' or 'append'")
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("content must not be empty")
        if section.singleton:
            self._adopt_current()
            previous, text = self._write_singleton(section, content, mode=mode)
            return {
                "status": "success",
                "section": section.key,
                "mode": mode,
                "content": text,
                "previous": previous,
                "memoryId": section.memory_id,
            } | self._rendered(section)
        if mode == "replace":
            raise InvalidInput(
                f"{section.key} is a list: entries are added with mode='append'; to change one entry, "
                "update_memory with its id"
            )
        if section.key == "decisions":
            return self.add_decision(content, title=title)
        if section.key == "conversationSummary":
            return self.record_conversation_summary(content, title=title)
        entry = Entry("", (title or "").strip(), _dated(content) if section.key == "recentChanges" else content.strip())
        if paused := self._guard({section.key: [entry]}):
            return paused
        self._adopt_current()
        memory_id = self._add(section, entry)
        return {"status": "success", "section": section.key, "mode": mode, "id": memory_id} | self._rendered(section)

    def update_current_task(self, task: str, *, mode: Mode = "replace") -> dict[str, Any]:
        if not isinstance(task, str) or not task.strip():
            raise InvalidInput("task must not be empty")
        out = self.write_section("currentTask", task, mode=mode)
        return {
            "status": "success",
            "currentTask": out["content"],
            "previous": out["previous"],
            "memoryId": out["memoryId"],
        } | {key: out[key] for key in ("file", "fileWritten", "fileNote") if key in out}

    def add_decision(self, decision: str, *, title: str | None = None, rationale: str | None = None) -> dict[str, Any]:
        entry = self._decision_entry(decision, title=title, rationale=rationale)
        if paused := self._guard({"decisions": [entry]}):
            return paused
        self._adopt_current()
        memory_id = self._add(_BY_KEY["decisions"], entry)
        return {
            "status": "success",
            "id": memory_id,
            "title": entry.title,
            "content": entry.content,
        } | self._rendered(_BY_KEY["decisions"])

    def record_conversation_summary(
        self,
        summary: str,
        *,
        title: str | None = None,
        current_task: str | None = None,
        recent_changes: Sequence[str] | None = None,
        decisions: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """A dated summary; in the same call, optionally a new current task, recent changes and
        decisions. Either everything is written or (size guard) nothing is."""
        entry = self._summary_entry(summary, title)
        changes = self._change_entries(recent_changes)
        decided = [self._decision_entry(d) for d in decisions or () if d and d.strip()]
        task = current_task.strip() if current_task and current_task.strip() else None
        if task is not None:
            section = _BY_KEY["currentTask"]
            size = section_bytes(section, [Entry("", "", normalize_singleton(section, task))])
            if size > self.limit:
                raise LimitExceeded(f"currentTask would be {size} bytes; its limit is {self.limit} bytes")
        pending = {"conversationSummary": [entry], "recentChanges": changes, "decisions": decided}
        if paused := self._guard(pending):
            return paused
        self._adopt_current()
        summary_id = self._add(_BY_KEY["conversationSummary"], entry)
        task_updated = False
        if task is not None:
            previous, text = self._write_singleton(_BY_KEY["currentTask"], task)
            task_updated = previous != text
        change_ids = [self._add(_BY_KEY["recentChanges"], change) for change in changes]
        decision_ids = [self._add(_BY_KEY["decisions"], decision) for decision in decided]
        self.render_view()
        return {
            "status": "success",
            "summaryId": summary_id,
            "title": entry.title,
            "currentTaskUpdated": task_updated,
            "recentChangeIds": change_ids,
            "decisionIds": decision_ids,
        }

    # -- suggestions --------------------------------------------------------------------------

    def suggest_updates(
        self,
        *,
        summary: str | None = None,
        current_task: str | None = None,
        decisions: Sequence[str] | None = None,
        recent_changes: Sequence[str] | None = None,
        include_git_diff: bool = True,
    ) -> dict[str, Any]:
        """Which sections to change, ``append`` or ``replace``, with a preview and the tool call
        that would do it. Writes nothing."""
        sections = self.sections()
        suggestions: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []

        def suggest(key: str, action: Mode, reason: str, preview: str, tool: str, arguments: Mapping[str, Any]) -> None:
            section = _BY_KEY[key]
            suggestions.append(
                {
                    "section": key,
                    "file": self.file_of(section),
                    "action": action,
                    "reason": reason,
                    "preview": preview,
                    "tool": tool,
                    "arguments": dict(arguments),
                }
            )

        text = (summary or "").strip()
        if text:
            entry = self._summary_entry(text, None)
            suggest(
                "conversationSummary",
                "append",
                "a summary of this conversation",
                render_entry(entry, heading=True),
                "record_conversation_summary",
                {"summary": text},
            )
        task_section = _BY_KEY["currentTask"]
        current = sections["currentTask"][0].content if sections["currentTask"] else ""
        if current_task and current_task.strip():
            new = normalize_singleton(task_section, current_task)
            if new != current:
                suggest(
                    "currentTask",
                    "replace",
                    "the current task changed",
                    render_section(task_section, [Entry("", "", new)]),
                    "update_current_task",
                    {"task": new},
                )
        elif text and current and not is_placeholder(current) and _DONE_HINT.search(text):
            suggest(
                "currentTask",
                "replace",
                "the summary says work was finished: the current task may be out of date",
                render_section(task_section, [Entry("", "", "<what comes next>")]),
                "update_current_task",
                {"task": "<what comes next>"},
            )
        existing = {dedupe_key(e) for e in sections["decisions"]}
        candidates = [(d.strip(), "a decision you named") for d in decisions or () if d and d.strip()]
        if not decisions and text:
            candidates += [(s, "the summary mentions a decision") for s in _sentences(text) if _DECISION_HINT.search(s)]
        for decision, reason in candidates:
            entry = self._decision_entry(decision)
            if dedupe_key(entry) in existing:
                skipped.append({"section": "decisions", "text": decision, "reason": "already recorded"})
                continue
            existing.add(dedupe_key(entry))
            suggest(
                "decisions",
                "append",
                reason,
                render_entry(entry, heading=True),
                "add_decision",
                {"decision": decision},
            )
        changes = self._change_entries(recent_changes)
        if changes:
            for change in changes:
                suggest(
                    "recentChanges",
                    "append",
                    "a change you named",
                    render_entry(change, heading=False),
                    "record_conversation_summary",
                    {"summary": text or "<summary>", "recentChanges": [change.content]},
                )
        elif include_git_diff:
            diff = self.git_diff()
            if diff.get("available") and diff.get("files"):
                change = Entry("", "", _dated(diff["summary"]))
                suggest(
                    "recentChanges",
                    "append",
                    "the working tree has uncommitted changes",
                    render_entry(change, heading=False),
                    "summarize_git_diff",
                    {"writeToRecentChanges": True},
                )
        if text:
            for sentence in _sentences(text):
                if _TODO_HINT.search(sentence) and not _DECISION_HINT.search(sentence):
                    suggest(
                        "todo",
                        "append",
                        "the summary mentions work still to do",
                        f"- [ ] {sentence}\n",
                        "update_context_section",
                        {"section": "todo", "content": f"[ ] {sentence}", "mode": "append"},
                    )
        for section in SECTIONS:
            if not section.singleton or (section.key == "currentTask" and current_task):
                continue
            entries = sections[section.key]
            if not entries or is_placeholder(entries[0].content):
                tool = "update_current_task" if section.key == "currentTask" else "update_context_section"
                arguments: dict[str, Any] = (
                    {"task": f"<{section.hint}>"}
                    if section.key == "currentTask"
                    else {"section": section.key, "content": f"<{section.hint}>", "mode": "replace"}
                )
                suggest(
                    section.key,
                    "replace",
                    "missing" if not entries else "still a placeholder",
                    f"# {section.title}\n\n<{section.hint}>\n",
                    tool,
                    arguments,
                )
        return {"status": "success", "suggestions": suggestions, "skipped": skipped, "wroteNothing": True}

    # -- git ------------------------------------------------------------------------------------

    def git_diff(self, *, write_to_recent_changes: bool = False) -> dict[str, Any]:
        """The working tree's changes (see :func:`eventmem.worktree.changes`), leaving out
        ``.eventmem/`` and a tracked view; ``write_to_recent_changes`` appends the summary."""
        excluded = [".eventmem/"]
        if self.view_tracked:
            excluded.append(self.relative(self.view_dir()).rstrip("/") + "/")
        out = {"status": "success"} | changes(self.paths.root, exclude=excluded, branch=self.paths.branch())
        if not write_to_recent_changes or not out["available"]:
            return out
        if not out["files"]:
            return out | {"recentChangeId": None, "note": "nothing to record: the working tree has no changes"}
        entry = Entry("", "", _dated(out["summary"]))
        if paused := self._guard({"recentChanges": [entry]}):
            return out | paused
        out["recentChangeId"] = self._add(_BY_KEY["recentChanges"], entry)
        self.render_view()
        return out

    # -- optimization -------------------------------------------------------------------------

    def apply(self) -> dict[str, Any]:
        """Carry out the current plan: create, remove duplicates, tidy, archive; then re-render."""
        plan = self.plan()
        for action in plan.of("create"):
            self._write_singleton(_BY_KEY[action.section], action.content)
        for action in plan.of("remove_duplicate"):
            self.service.delete(action.id, reason=f"duplicate of {action.duplicate_of}", by=self.by)
        for action in plan.of("tidy"):
            self.service.update(action.id, content=action.content, by=self.by)
        archived: dict[str, Any] = {"archived": 0, "segments": []}
        if ids := [action.id for action in plan.of("archive")]:
            archived = archive_entries(self.service, ids, reason="project-context optimization", by=self.by)
        self.render_view()
        return {
            "status": "success",
            "applied": plan.to_dict(),
            "archiveSegments": archived["segments"],
            "remaining": self.plan().to_dict(),
        }

    # -- import -------------------------------------------------------------------------------

    def import_pmp(self, directory: Path, *, force: bool = False) -> dict[str, Any]:
        """Turn an ``.ai/`` directory into events. Entries get ids derived from their text, and a
        section already holding the same text is left alone, so a second import changes nothing.
        A singleton changed through eventmem since the last import is kept unless ``force``."""
        if not directory.is_dir():
            raise InvalidInput(f"{directory} is not a directory")
        self._check_import_files(directory)
        by, self.by = self.by, IMPORT_BY
        try:
            report = self._import(directory, force=force)
        finally:
            self.by = by
        self._adopt(directory)
        view = self.render_view()
        report["viewWritten"] = view["written"]
        return report

    def _check_import_files(self, directory: Path) -> None:
        """Refuse a folder of the project reached through a link, or a section file that is a link
        (``.ai/context.md -> ~/.ssh/id_ed25519`` must not end up in the journal)."""
        absolute = Path(os.path.abspath(directory))
        if os.path.normpath(absolute).startswith(os.path.normpath(self.paths.root) + os.sep):
            self.paths.inside(absolute, kind="folder")
        wanted = {s.file for s in SECTIONS} | {s.file.replace("-", "_") for s in SECTIONS}
        for entry in directory.iterdir():
            if entry.name.lower() in wanted and entry.is_symlink():
                raise UnsafePath(f"{entry} is a symbolic link; eventmem imports only real files. Remove the link.")

    def _parse_import_files(self, directory: Path) -> dict[str, tuple[Path, ParsedSection]]:
        """Each section file of ``directory``, parsed; refused before anything is written when one
        holds more than its section may (``section_max_bytes``): a list file of 200,000 items would
        otherwise be appended one memory at a time, for minutes, and half of it if interrupted."""
        names = {p.name.lower(): p for p in directory.iterdir() if p.is_file()}
        found: dict[str, tuple[Path, ParsedSection]] = {}
        for section in SECTIONS:
            path = names.get(section.file) or names.get(section.file.replace("-", "_"))
            if path is None:
                continue
            parsed = parse_section(section, path.read_text(encoding="utf-8", errors="replace"))
            entries = parsed.entries[:1] if section.singleton else parsed.entries
            size = section_bytes(section, [Entry("", title, content) for title, content in entries])
            if size > self.limit:
                raise LimitExceeded(
                    f"{path.name}: {section.key} would be at least {size} bytes; its limit is {self.limit} bytes "
                    "(section_max_bytes). Nothing was imported: keep the essential part of the file and import again."
                )
            found[section.key] = (path, parsed)
        return found

    def _import(self, directory: Path, *, force: bool) -> dict[str, Any]:
        files = self._parse_import_files(directory)
        sections = self.sections()
        per_section: dict[str, dict[str, Any]] = {}
        events = 0
        for section in SECTIONS:
            path, parsed = files.get(section.key, (None, None))
            counts: dict[str, Any] = {"file": path.name if path else None, "added": 0, "updated": 0, "unchanged": 0}
            counts |= {"kept": 0, "placeholders": 0}
            per_section[section.key] = counts
            if path is None or parsed is None:
                continue
            counts["placeholders"] = parsed.placeholders
            if parsed.reversed:
                counts["reversed"] = True
            if section.singleton:
                if not parsed.entries:
                    continue
                content = parsed.entries[0][1]
                entries = sections[section.key]
                current = entries[0] if entries else None
                if current is not None and normalize_singleton(section, current.content) == content:
                    counts["unchanged"] += 1
                elif (
                    current is not None
                    and not force
                    and current.updated_by != IMPORT_BY
                    and not is_placeholder(current.content)
                ):
                    counts["kept"] += 1
                else:
                    self._write_singleton(section, content)
                    counts["updated" if current is not None else "added"] += 1
                    events += 1
                continue
            have = Counter(entry_key(e.title, e.content) for e in sections[section.key])
            seen: Counter[str] = Counter()
            for title, content in parsed.entries:
                key = entry_key(title, content)
                occurrence = seen[key]
                seen[key] += 1
                memory_id = import_id(section, title, content, occurrence)
                with self.store.read() as view:
                    record = view.record(memory_id)
                if (record is not None and record.exists) or occurrence < have[key]:
                    counts["unchanged"] += 1
                    continue
                self._add(section, Entry("", title, content), memory_id=memory_id)
                counts["added"] += 1
                events += 1
        return {"status": "success", "directory": str(directory), "sections": per_section, "events": events}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 3]
