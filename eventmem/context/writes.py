"""Writing a project's context: a section replaced or appended to, with the size guard (see
:mod:`eventmem.context.project_context`), and the optimization plan carried out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from eventmem.context.archive import archive_entries
from eventmem.context.parse import normalize_singleton
from eventmem.context.reading import BY_KEY, SECTION_IMPORTANCE, Mode, section_of
from eventmem.context.render import is_placeholder, section_bytes
from eventmem.context.view import ContextView
from eventmem.core.errors import InvalidInput, LimitExceeded
from eventmem.core.events import MemoryRestored
from eventmem.core.ids import new_id, now_iso
from eventmem.core.sections import Entry, Section

__all__ = ["ContextWrites", "dated"]

_LEADING_DATE = re.compile(r"^\s*\d{4}-\d{2}-\d{2}\b")


def _today() -> str:
    return now_iso()[:10]


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def dated(text: str) -> str:
    text = text.strip()
    return text if _LEADING_DATE.match(text) else f"{_today()}: {text}"


def _first_sentence(text: str, limit: int = 80) -> str:
    line = text.strip().split("\n", 1)[0]
    sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


class ContextWrites(ContextView):
    """The protocol's writes: every change is a command of the service, so an event on the journal."""

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
            section = BY_KEY[key]
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
        return [Entry("", "", dated(change)) for change in changes or () if change and change.strip()]

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
        entry = Entry("", (title or "").strip(), dated(content) if section.key == "recentChanges" else content.strip())
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
        memory_id = self._add(BY_KEY["decisions"], entry)
        return {
            "status": "success",
            "id": memory_id,
            "title": entry.title,
            "content": entry.content,
        } | self._rendered(BY_KEY["decisions"])

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
            section = BY_KEY["currentTask"]
            size = section_bytes(section, [Entry("", "", normalize_singleton(section, task))])
            if size > self.limit:
                raise LimitExceeded(f"currentTask would be {size} bytes; its limit is {self.limit} bytes")
        pending = {"conversationSummary": [entry], "recentChanges": changes, "decisions": decided}
        if paused := self._guard(pending):
            return paused
        self._adopt_current()
        summary_id = self._add(BY_KEY["conversationSummary"], entry)
        task_updated = False
        if task is not None:
            previous, text = self._write_singleton(BY_KEY["currentTask"], task)
            task_updated = previous != text
        change_ids = [self._add(BY_KEY["recentChanges"], change) for change in changes]
        decision_ids = [self._add(BY_KEY["decisions"], decision) for decision in decided]
        self.render_view()
        return {
            "status": "success",
            "summaryId": summary_id,
            "title": entry.title,
            "currentTaskUpdated": task_updated,
            "recentChangeIds": change_ids,
            "decisionIds": decision_ids,
        }

    # -- optimization -------------------------------------------------------------------------

    def apply(self) -> dict[str, Any]:
        """Carry out the current plan: create, remove duplicates, tidy, archive; then re-render."""
        plan = self.plan()
        for action in plan.of("create"):
            self._write_singleton(BY_KEY[action.section], action.content)
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
