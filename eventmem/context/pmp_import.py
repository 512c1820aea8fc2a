"""Importing an ``.ai/`` directory of the shared project-memory protocol: sections in, events out."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from eventmem.context.parse import ParsedSection, entry_key, import_id, normalize_singleton, parse_section
from eventmem.context.reading import IMPORT_BY
from eventmem.context.render import is_placeholder, section_bytes
from eventmem.context.writes import ContextWrites
from eventmem.core.errors import InvalidInput, LimitExceeded, UnsafePath
from eventmem.core.sections import SECTIONS, Entry

__all__ = ["PmpImport"]


class PmpImport(ContextWrites):
    """``eventmem import pmp``: entries get ids derived from their text, so a second import adds nothing."""

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
