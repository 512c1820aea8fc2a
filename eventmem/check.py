"""``eventmem check``: what a branch's journal would do to everyone who merges it.

Everything is read from git objects (``git ls-tree``, ``git cat-file``, ``git blame``), never from
the working tree, so the check sees exactly what the branch would merge. The branch is compared
with its merge base with the target branch; a finding is an error that fails the check:

- ``undecodable``: an added line that is not an event (the decoder's own message);
- ``future-stamp``: an added event stamped more than 5 minutes after the commit that added it (or
  after now): last writer wins by stamp, so it would win every edit until the clocks catch up;
- ``reused-id``: an added event whose id the base (or another added line) holds with different
  content, or an added ``saved`` of a memory id that already exists with another creator;
- ``unknown-memory``: an added event about a memory (or link) that neither the base's journal nor
  the branch creates: the branch could not have seen it;
- ``rewritten-history``: a base segment whose bytes are not a prefix of the branch's, a removed
  segment, a changed archive segment. The one rewrite allowed is compaction's
  (:func:`eventmem.lifecycle.archive_memories`): lines moved byte for byte out of a journal
  segment into a new archive segment that an added ``archived`` event of that segment names;
- ``network-setting``: a tracked ``.eventmem/config.toml`` that reaches the network or reads the
  environment (:func:`eventmem.config.network_settings`);
- ``symlink``: a symlink (git mode 120000) in ``.eventmem/`` or in the tracked render folder;
- ``too-large``: a blob larger than :data:`eventmem.limits.MAX_CHECKED_BLOB_BYTES`, left unread.
"""

from __future__ import annotations

import time
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from eventmem.audit_report import Finding
from eventmem.codec import LineError, UnknownEvent, decode_line
from eventmem.config import invalid_setting, network_settings
from eventmem.events import (
    AnyEvent,
    LinkAdded,
    LinkRemoved,
    MemoryArchived,
    MemoryDeleted,
    MemoryExpired,
    MemoryPromoted,
    MemoryRestored,
    MemorySaved,
    MemoryUpdated,
    memory_ids,
)
from eventmem.history import HistoryError, cat_file, decode_segment, default_base, git, merge_base
from eventmem.ids import iso_to_epoch
from eventmem.limits import MAX_CHECKED_BLOB_BYTES
from eventmem.trust_audit import setting_line

__all__ = ["CheckReport", "check_branch"]

FUTURE_SECONDS: Final = 300.0
_CONFIG_BYTES: Final = 1 << 20
_SYMLINK: Final = "120000"
Decoded = AnyEvent | UnknownEvent


class CheckReport(msgspec.Struct, kw_only=True):
    base: str
    """The revision compared with, as given or as chosen (``origin/HEAD``, ``main``, ``master``)."""
    base_chosen: bool
    """``base`` was chosen by the check, not given."""
    fork: str
    """The merge base of ``base`` and ``head``: the journal the branch started from."""
    head: str
    events_added: int
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


@dataclass(frozen=True, slots=True)
class _Blob:
    mode: str
    oid: str
    size: int


@dataclass(frozen=True, slots=True)
class _Line:
    path: str
    number: int
    offset: int
    data: bytes


def check_branch(root: Path, base: str | None = None, head: str = "HEAD", *, now: float | None = None) -> CheckReport:
    """Check what ``head`` adds to the journal of the project at ``root`` since its merge base with
    ``base`` (default: :func:`eventmem.history.default_base`)."""
    now = time.time() if now is None else now
    base_name = base or default_base(root)
    head_commit = _commit(root, head)
    fork = merge_base(root, _commit(root, base_name), head_commit)
    memory_dir = git(root, "rev-parse", "--show-prefix").decode("utf-8", "surrogateescape").strip() + ".eventmem"
    findings: list[Finding] = []
    head_tree = _ls_tree(root, head_commit, [memory_dir])
    fork_tree = _ls_tree(root, fork, [memory_dir])
    config = _config(root, memory_dir, head_tree, fork_tree, findings)
    # a tracked config.local.toml counts as the repository's too, and wins over config.toml
    config |= _config(root, memory_dir, head_tree, fork_tree, findings, name="config.local.toml")
    folders = [memory_dir, *_render_folder(config, memory_dir)]
    head_tree = _ls_tree(root, head_commit, folders)
    base_tree = _ls_tree(root, fork, folders)
    for path in _odd_segments(root, head_commit, memory_dir).keys() - _odd_segments(root, fork, memory_dir).keys():
        message = "a segment that is not a regular file (a folder or a submodule): no eventmem reads it"
        findings.append(_finding("not-a-file", path, 0, -1, message))
    for folder in folders[1:]:  # a link on the way to the render folder leads out of the project too
        parents = [parent.as_posix() for parent in Path(folder).parents if parent.parts]
        head_links, base_links = (_ls_links(root, commit, parents) for commit in (head_commit, fork))
        head_tree |= {path: blob for path, blob in head_links.items() if base_links.get(path) != blob}
    derived = (f"{memory_dir}/cache/", f"{memory_dir}/local/")
    for path, blob in sorted(head_tree.items()):
        if path.startswith(derived) and base_tree.get(path) != blob:
            message = (
                "a file of this clone's own cache is tracked: a snapshot from a branch can hold memories "
                "no journal line has; `git rm --cached` it"
            )
            findings.append(_finding("tracked-cache", path, 0, -1, message))
        if blob.mode == _SYMLINK and base_tree.get(path) != blob:
            message = "a symlink (git mode 120000): paths must never leave the project"
            findings.append(_finding("symlink", path, 0, -1, message))
    segments = _Segments(root, memory_dir, base_tree, head_tree, findings)
    added = segments.added_lines()
    events = _decode(added, findings)
    _Rules(segments.base_events(), now, _commit_times(root, head_commit, added, now)).apply(events, findings)
    findings.sort(key=lambda f: (f.path, f.line, f.code))
    return CheckReport(
        base=base_name,
        base_chosen=base is None,
        fork=fork,
        head=head_commit,
        events_added=len(events),
        findings=findings,
    )


def _finding(code: str, path: str, line: int, offset: int, message: str) -> Finding:
    return Finding(code=code, severity="error", path=path, line=line, offset=offset, message=message)


def _commit(root: Path, rev: str) -> str:
    try:
        return git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}").decode().strip()
    except HistoryError:
        raise HistoryError(f"{rev!r} is not a git revision of {root}") from None


def _ls_tree(root: Path, commit: str, folders: Iterable[str]) -> dict[str, _Blob]:
    """Every file under ``folders`` at ``commit``: path (from the repository's top) to its blob."""
    out = git(root, "--literal-pathspecs", "ls-tree", "-r", "-z", "-l", "--full-tree", commit, "--", *folders)
    tree: dict[str, _Blob] = {}
    for item in out.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        if not tab or len(fields) != 4 or fields[1] != b"blob":
            continue
        size = int(fields[3]) if fields[3].isdigit() else 0
        tree[name.decode("utf-8", "surrogateescape")] = _Blob(fields[0].decode(), fields[2].decode(), size)
    return tree


def _odd_segments(root: Path, commit: str, memory_dir: str) -> dict[str, str]:
    """Entries of the journal and archive folders at ``commit`` named like a segment that are not
    files (a folder, a submodule): path to its object id."""
    folders = [f"{memory_dir}/journal/", f"{memory_dir}/archive/"]
    out = git(root, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", commit, "--", *folders)
    odd: dict[str, str] = {}
    for item in out.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if tab and len(fields) == 3 and fields[1] != b"blob" and path.endswith(".jsonl"):
            odd[path] = fields[2].decode()
    return odd


def _ls_links(root: Path, commit: str, paths: list[str]) -> dict[str, _Blob]:
    """Which of ``paths`` (exact paths, not walked) are symlinks at ``commit``."""
    if not paths:
        return {}
    out = git(root, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", commit, "--", *paths)
    links: dict[str, _Blob] = {}
    for item in out.split(b"\0"):
        meta, tab, name = item.partition(b"\t")
        fields = meta.split()
        path = name.decode("utf-8", "surrogateescape")
        if tab and len(fields) == 3 and fields[0].decode() == _SYMLINK and path in paths:
            links[path] = _Blob(fields[0].decode(), fields[2].decode(), 0)
    return links


def _read(root: Path, blobs: dict[str, _Blob], findings: list[Finding]) -> dict[str, bytes]:
    """The bytes of each blob, those over the size limit left unread and reported."""
    readable = {path: blob for path, blob in blobs.items() if blob.size <= MAX_CHECKED_BLOB_BYTES}
    for path in blobs.keys() - readable.keys():
        message = f"{blobs[path].size} bytes, more than the {MAX_CHECKED_BLOB_BYTES} the check reads: not checked"
        findings.append(_finding("too-large", path, 0, -1, message))
    paths = sorted(readable)
    contents = cat_file(root, [readable[path].oid for path in paths])
    return {path: data or b"" for path, data in zip(paths, contents, strict=True)}


def _config(
    root: Path,
    memory_dir: str,
    head: dict[str, _Blob],
    base: dict[str, _Blob],
    findings: list[Finding],
    name: str = "config.toml",
) -> dict[str, Any]:
    """The branch's tracked config table; its network settings reported when the branch changed it."""
    path = f"{memory_dir}/{name}"
    blob = head.get(path)
    if blob is None or blob.mode == _SYMLINK:
        return {}
    changed = base.get(path) != blob
    if blob.size > _CONFIG_BYTES:
        if changed:
            findings.append(_finding("too-large", path, 0, -1, f"{blob.size} bytes, more than a config may hold"))
        return {}
    text = (cat_file(root, [blob.oid])[0] or b"").decode("utf-8", "replace")
    try:
        table: dict[str, Any] = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        if changed:
            findings.append(_finding("invalid-config", path, getattr(exc, "lineno", 1), -1, f"not valid TOML: {exc}"))
        return {}
    if changed:
        for setting in network_settings(table):
            line = setting_line(text, setting.split(" =", 1)[0])
            message = f"tracked setting {setting}; a tracked setting may only choose what stays on the machine"
            findings.append(_finding("network-setting", path, line, -1, message))
        invalid = invalid_setting(table)
        if invalid is not None:  # every eventmem command on the merged project would refuse to run
            key, reason = invalid
            message = f"invalid setting: {reason}; every eventmem command would refuse this config"
            findings.append(_finding("invalid-config", path, setting_line(text, key), -1, message))
    return table


def _render_folder(config: dict[str, Any], memory_dir: str) -> list[str]:
    render = config.get("render_ai_dir")
    if not isinstance(render, str) or not render.strip() or render.startswith("/") or "\0" in render:
        return []
    if ".." in Path(render).parts:
        return []
    prefix = memory_dir.removesuffix(".eventmem")
    return [prefix + render.strip().strip("/")]


def _lines(data: bytes, path: str, start: int = 0) -> Iterator[_Line]:
    """The complete, non-blank lines of ``data`` from byte ``start`` (at a line's start) on."""
    number = data.count(b"\n", 0, start) + 1
    offset = start
    while True:
        end = data.find(b"\n", offset)
        if end < 0:
            return
        if data[offset:end].strip():
            yield _Line(path, number, offset, data[offset:end])
        number += 1
        offset = end + 1


class _Segments:
    """The base's and the branch's segments, and which lines the branch adds."""

    def __init__(
        self, root: Path, memory_dir: str, base: dict[str, _Blob], head: dict[str, _Blob], findings: list[Finding]
    ) -> None:
        self.findings = findings
        self.journal, self.archive = f"{memory_dir}/journal/", f"{memory_dir}/archive/"

        def segments(tree: dict[str, _Blob]) -> dict[str, _Blob]:
            return {
                path: blob
                for path, blob in tree.items()
                if path.startswith((self.journal, self.archive))
                and path.endswith(".jsonl")
                and blob.mode != _SYMLINK
                and path.count("/") == self.journal.count("/")  # (as the journal reads: no nested folder)
            }

        self.base_blobs, self.head_blobs = segments(base), segments(head)
        changed = {p: b for p, b in self.head_blobs.items() if self.base_blobs.get(p) != b}
        self.base = _read(root, self.base_blobs, findings)
        self.head = _read(root, changed, findings)
        gone = sorted(self.base_blobs.keys() - self.head_blobs.keys())
        findings.extend(_finding("rewritten-history", path, 0, -1, "a segment of the base is removed") for path in gone)

    def base_events(self) -> list[Decoded]:
        events: list[Decoded] = []
        for path in sorted(self.base):  # a line of the base that does not decode is the base's own problem
            try:
                events.extend(entry.event for entry in decode_segment(self.base[path], path)[0])
            except RecursionError:
                events.extend(e for line in _lines(self.base[path], path) if (e := _try_decode(line.data)) is not None)
        return events

    def added_lines(self) -> list[_Line]:
        added: list[_Line] = []
        moved: dict[str, set[bytes]] = {}  # journal segment to the base lines compaction moved out of it
        for path in sorted(p for p in self.head if p.startswith(self.journal)):
            added.extend(self._journal_lines(path, moved))
        landed: set[bytes] = set()
        every = {line for lines in moved.values() for line in lines}
        for path in sorted(p for p in self.head if p.startswith(self.archive)):
            if path in self.base_blobs:
                self._rewritten(path, "an archive segment is immutable, and the branch changes it")
                kept = {line.data for line in _lines(self.base.get(path, b""), path)}
                added.extend(line for line in _lines(self.head[path], path) if line.data not in kept)
                continue
            for line in _lines(self.head[path], path):
                if line.data in every:
                    landed.add(line.data)
                else:
                    added.append(line)
        for path, lines in sorted(moved.items()):
            if lines - landed:
                self._rewritten(path, "lines of the base are gone, and no new archive segment holds them")
        for path, data in self.head.items():
            if data and not data.endswith(b"\n"):
                tail = data.rfind(b"\n") + 1
                number = data.count(b"\n") + 1
                self.findings.append(_finding("undecodable", path, number, tail, "an unterminated last line"))
        return added

    def _rewritten(self, path: str, message: str, line: int = 0, offset: int = -1) -> None:
        self.findings.append(_finding("rewritten-history", path, line, offset, message))

    def _journal_lines(self, path: str, moved: dict[str, set[bytes]]) -> list[_Line]:
        data = self.head[path]
        old = self.base.get(path)
        if old is None:
            return list(_lines(data, path))
        complete = old[: old.rfind(b"\n") + 1]
        if data.startswith(complete):
            return list(_lines(data, path, len(complete)))
        # not a prefix: only compaction may have moved lines out (into a new archive segment)
        before, after = list(_lines(complete, path)), list(_lines(data, path))
        j = 0
        gone: list[_Line] = []
        first: _Line | None = None  # the branch's line where it first departs from the base
        for old_line in before:
            if j < len(after) and old_line.data == after[j].data:
                j += 1
                continue
            if not gone and j < len(after):
                first = after[j]
            gone.append(old_line)
        rest = after[j:]
        if first is None and not gone and rest:
            first = rest[0]
        if not self._compaction(gone, rest):
            number, offset = (first.number, first.offset) if first else (0, -1)
            self._rewritten(path, "changes or removes lines of the base (history may only grow)", number, offset)
            kept = {line.data for line in before}
            return [line for line in after if line.data not in kept]
        moved[path] = {line.data for line in gone}
        return rest

    def _compaction(self, gone: list[_Line], rest: list[_Line]) -> bool:
        """``gone`` is what compaction moves: each line about a memory an added ``archived`` event
        names, into a new archive segment (its landing there is checked afterwards)."""
        archived: set[str] = set()
        for line in rest:
            event = _try_decode(line.data)
            if isinstance(event, MemoryArchived):
                target = self.journal.removesuffix("journal/") + event.segment
                if target.startswith(self.archive) and target in self.head and target not in self.base_blobs:
                    archived.update(event.memories)
        if not gone or not archived:
            return False
        for line in gone:
            event = _try_decode(line.data)
            if event is None or isinstance(event, UnknownEvent):
                return False
            if not isinstance(event, LinkRemoved) and not set(memory_ids(event)) & archived:
                return False
        return True


def _decode_one(data: bytes) -> Decoded:
    """:func:`eventmem.codec.decode_line`, with a line nested past the parser's depth a ``LineError`` too."""
    try:
        return decode_line(data)
    except RecursionError:
        raise LineError("nested too deep") from None


def _try_decode(data: bytes) -> Decoded | None:
    try:
        return _decode_one(data)
    except LineError:
        return None


def _decode(lines: list[_Line], findings: list[Finding]) -> list[tuple[_Line, Decoded]]:
    events: list[tuple[_Line, Decoded]] = []
    for line in lines:
        try:
            events.append((line, _decode_one(line.data)))
        except LineError as exc:
            findings.append(_finding("undecodable", line.path, line.number, line.offset, f"not an event: {exc}"))
    return events


def _commit_times(root: Path, head: str, lines: list[_Line], now: float) -> dict[tuple[str, int], float]:
    """When the commit that added each line was made (``git blame``); a line blame cannot place
    gets the head commit's time."""
    by_path: dict[str, list[int]] = {}
    for line in lines:
        by_path.setdefault(line.path, []).append(line.number)
    try:
        fallback = float(git(root, "show", "-s", "--format=%ct", head).decode().strip() or now)
    except (HistoryError, ValueError):
        fallback = now
    times: dict[tuple[str, int], float] = {}
    for path, numbers in by_path.items():
        try:
            out = git(root, "blame", "--line-porcelain", "-L", f"{min(numbers)},{max(numbers)}", head, "--", path)
        except HistoryError:
            out = b""
        final = 0
        for row in out.split(b"\n"):
            fields = row.split(b" ")
            if len(fields) >= 3 and len(fields[0]) == 40 and fields[2].isdigit():
                final = int(fields[2])
            elif len(fields) == 2 and fields[0] == b"committer-time" and fields[1].isdigit():
                times[(path, final)] = float(fields[1])
        for number in numbers:
            times.setdefault((path, number), fallback)
    return times


class _Rules:
    """The rules about added events, against the base's journal and the other added events."""

    def __init__(self, base: list[Decoded], now: float, commit_times: dict[tuple[str, int], float]) -> None:
        self.now = now
        self.commit_times = commit_times
        self.by_id: dict[str, Decoded] = {}
        self.creators: dict[str, str] = {}
        self.memories: set[str] = set()
        self.links: set[str] = set()
        for event in base:
            self.by_id.setdefault(event.id, event)
            self._learn(event)

    def _learn(self, event: Decoded) -> None:
        if isinstance(event, MemorySaved):
            self.memories.add(event.memory)
            self.creators.setdefault(event.memory, event.by)
        elif isinstance(event, LinkAdded):
            self.links.add(event.link)

    def apply(self, events: list[tuple[_Line, Decoded]], findings: list[Finding]) -> None:
        from eventmem.context.sections import SECTIONS

        sections = {section.memory_id for section in SECTIONS if section.singleton}
        base_ids = set(self.by_id)
        for _, event in events:  # the branch may save a memory after an event about it
            if event.id not in base_ids:
                self._learn(event)
        seen: dict[str, Decoded] = {}
        for line, event in events:

            def report(code: str, message: str, line: _Line = line) -> None:
                findings.append(_finding(code, line.path, line.number, line.offset, message))

            self._future(line, event, report)
            earlier = self.by_id.get(event.id) if event.id in base_ids else seen.get(event.id)
            if earlier is not None and earlier != event:
                where = "the base" if event.id in base_ids else "another added line"
                report("reused-id", f"event id {event.id} is already used by {where}, with different content")
            seen.setdefault(event.id, event)
            if isinstance(event, UnknownEvent) or earlier is not None:
                continue
            if isinstance(event, MemorySaved) and event.memory not in sections:
                creator = self.creators.get(event.memory, event.by)
                if creator != event.by:
                    report("reused-id", f"memory id {event.memory} already exists, created by {creator or '?'!r}")
            for missing, what in self._references(event):
                report(
                    "unknown-memory", f"{_tag(event)} event {event.id} is about {what} {missing}, unknown to the base"
                )

    def _future(self, line: _Line, event: Decoded, report: Any) -> None:
        try:
            at = iso_to_epoch(event.ts)
        except (ValueError, OverflowError):
            return
        committed = self.commit_times.get((line.path, line.number), self.now)
        limit, what = (committed, "the commit that added it") if committed < self.now else (self.now, "now")
        if at - limit > FUTURE_SECONDS:
            moment = f"{datetime.fromtimestamp(limit, UTC):%Y-%m-%dT%H:%M:%SZ}"
            report("future-stamp", f"event {event.id} is stamped {event.ts}, {at - limit:.0f}s after {what} ({moment})")

    def _references(self, event: Decoded) -> list[tuple[str, str]]:
        match event:
            case LinkAdded():
                return [(m, "memory") for m in (event.source, event.target) if m not in self.memories]
            case LinkRemoved():
                return [] if event.link in self.links else [(event.link, "link")]
            case MemoryUpdated() | MemoryPromoted() | MemoryDeleted() | MemoryRestored() | MemoryExpired():
                return [] if event.memory in self.memories else [(event.memory, "memory")]
        return []


def _tag(event: Decoded) -> str:
    return event.type if isinstance(event, UnknownEvent) else str(event.__struct_config__.tag)
