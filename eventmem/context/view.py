"""The ``.ai/`` files as a view of the journal: where they go, rendering them, and which ones eventmem wrote."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from eventmem.context.reading import ContextReader
from eventmem.context.render import render_section
from eventmem.core.errors import InvalidInput
from eventmem.core.sections import SECTIONS, Entry, Section
from eventmem.journal.files import FileLock, atomic_write

if TYPE_CHECKING:
    from eventmem.service import MemoryService

__all__ = ["VIEW_MEMO", "ContextView"]

log = logging.getLogger("eventmem.project_context")

VIEW_MEMO: Final = "ai-view.json"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
