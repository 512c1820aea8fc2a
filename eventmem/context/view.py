"""The ``.ai/`` files as a view of the journal: where they go, rendering them, and which ones eventmem wrote."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from eventmem.context.reading import ContextReader, SectionOrder
from eventmem.context.render import render_section, section_pieces
from eventmem.core.errors import InvalidInput
from eventmem.core.sections import SECTIONS, Entry, Section
from eventmem.journal.files import FileLock, Replacement, atomic_write, remove_leftover_temp_files

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = ["VIEW_MEMO", "ContextView"]

log = logging.getLogger("eventmem.project_context")

VIEW_MEMO: Final = "ai-view.json"


_VIEW_FILES: Final = frozenset(section.file for section in SECTIONS)
_PIECE: Final = 1 << 16
"""About how many characters of a file are rendered before they are written out."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha(path: Path) -> str | None:
    """The hex SHA-256 of the file at ``path``, read a piece at a time; ``None``: there is none."""
    try:
        with path.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest()
    except FileNotFoundError:
        return None


def _holds(path: Path, needle: bytes) -> bool:
    """Whether the file at ``path`` holds ``needle``, read a piece at a time."""
    tail = b""
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            if needle in tail + chunk[: len(needle)] or needle in chunk:
                return True
            tail = chunk[-(len(needle) - 1) :]
    return False


class ContextView(ContextReader):
    """Rendering the view files of :class:`ContextReader`'s sections."""

    def __init__(self, service: MemoryService, *, by: str = "") -> None:
        super().__init__(service, by=by)
        self.view_dir()  # a render folder that is a link is refused before anything is written

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
        """Write the eight files (atomically, only those that changed); ``sha256`` holds each file's
        hash as rendered. In a tracked folder a file that someone edited since eventmem wrote it is
        left alone and reported in ``skipped`` (``eventmem import pmp`` takes the edit in); a file with
        merge-conflict markers is replaced.

        Each file is rendered an entry at a time into a temp file in the cache folder (a tracked
        folder sees one only when its file changes), hashed as it is written, and compared with the
        file by hash: a project's decisions can make a file of tens of megabytes, which a server
        rendering it after every change would otherwise hold whole three or four times over, and
        keep much of as allocator slack afterwards.

        The journal is folded under the view's lock, so of two processes (or threads) rendering at
        once the later one writes what the later journal says: a view is never left older than it."""
        directory = self.view_dir()
        if not self.paths.journal_dir.is_dir():  # nothing saved yet: leave the project untouched
            texts = self._texts(self.sections())
            hashes = {name: _sha(text.encode("utf-8")) for name, text in texts.items()}
            return {"dir": self.relative(directory), "written": [], "skipped": [], "sha256": hashes}
        written: list[str] = []
        skipped: list[str] = []
        hashes = {}
        self.paths.cache_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(self.paths.cache_dir / "ai-view.lock").hold():
            for folder in (self.paths.cache_dir, directory):  # (a render killed half way: its temp files)
                if folder.is_dir():
                    remove_leftover_temp_files(folder, _VIEW_FILES.__contains__)
            order = self.order()
            memo = self._load_memo() if self.view_tracked else {}
            before = dict(memo)
            for section in SECTIONS:
                name = section.file
                path = self.paths.inside(directory / name)
                with Replacement(path, scratch=self.paths.cache_dir) as new:
                    for piece in self._pieces(section, order[section.key]):
                        new.write(piece)
                    hashes[name] = rendered = new.sha256
                    current = _file_sha(path)
                    if current == rendered:
                        memo[name] = rendered
                        continue
                    if (
                        self.view_tracked
                        and current is not None
                        and memo.get(name) != current
                        and not _holds(path, b"<<<<<<< ")
                    ):
                        skipped.append(name)
                        continue
                    new.replace(durable=False)
                memo[name] = rendered
                written.append(name)
            if self.view_tracked and memo != before:
                self._save_memo(memo)
        if skipped:
            log.warning("left %s alone: edited by hand (run `eventmem import pmp` to take the edits in)", skipped)
        return {"dir": self.relative(directory), "written": written, "skipped": skipped, "sha256": hashes}

    def _pieces(self, section: Section, order: SectionOrder) -> Iterator[bytes]:
        """``section``'s file, encoded, a batch of entries at a time."""
        entries = self.entries_of(section, order.ids)
        pending: list[str] = []
        size = 0
        for piece in section_pieces(section, entries, titled=order.titled):
            pending.append(piece)
            size += len(piece)
            if size >= _PIECE:
                yield "".join(pending).encode("utf-8")
                pending.clear()
                size = 0
        if pending:
            yield "".join(pending).encode("utf-8")

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
            order = self.order()
            for section in SECTIONS:
                try:
                    current = _file_sha(directory / section.file)
                except OSError:
                    continue
                if current is None:
                    continue
                rendered = hashlib.sha256()
                for piece in self._pieces(section, order[section.key]):
                    rendered.update(piece)
                if rendered.hexdigest() == current:
                    memo[section.file] = current
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
