"""Errors named for the condition, caught by meaning.

``EventmemError`` is the root. Errors a caller (or a model) can fix by changing its input derive from
``InvalidInput``; the MCP adapter turns those into tool errors with the same message.
"""

from __future__ import annotations

from eventmem.core.ids import ULID_PREFIX_MIN, too_short_for_a_prefix

__all__ = [
    "EventmemError",
    "InvalidInput",
    "JournalCorrupt",
    "JournalUnwritable",
    "LimitExceeded",
    "MemoryGone",
    "MissingExtra",
    "SecretRefused",
    "SnapshotDamaged",
    "UnknownLink",
    "UnknownMemory",
    "UnsafePath",
    "told_to",
]

SURFACES = ("mcp", "cli", "http")
"""Where a person reads an error: an MCP client's model, the command line, the REST API."""


def told_to(exc: BaseException, surface: str) -> str:
    """The error's message as it reads on ``surface``: naming that surface's own commands
    (``eventmem restore ID`` on the command line, ``restore_memory`` to a model)."""
    return exc.told_to(surface) if isinstance(exc, EventmemError) else str(exc)


class EventmemError(Exception):
    """Base of every error eventmem raises on purpose."""

    def told_to(self, surface: str) -> str:
        """The message for ``surface`` (one of :data:`SURFACES`); ``str()`` is the MCP tools' wording."""
        return str(self)


class InvalidInput(EventmemError, ValueError):
    """The request itself is wrong: an empty text, a bad filter, an unknown kind."""


class MissingExtra(InvalidInput):
    """A feature behind an optional extra was asked for where that extra is not installed."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs the {extra!r} extra, which is not installed: pip install 'eventmem[{extra}]'"
        )
        self.feature = feature
        self.extra = extra


class UnknownMemory(InvalidInput, KeyError):
    def __init__(self, memory_id: str) -> None:
        super().__init__(memory_id)
        self.memory_id = memory_id

    def __str__(self) -> str:
        return self.told_to("mcp")

    def told_to(self, surface: str) -> str:
        how = {
            "cli": "use `eventmem search WORDS` to find the right id",
            "http": "search with POST /api/v1/memories/search to find the right id",
        }.get(surface, "use retrieve_context or recall_memories to find the right id")
        if surface == "cli" and too_short_for_a_prefix(self.memory_id):
            how = f"an id prefix needs at least {ULID_PREFIX_MIN} characters, as in `eventmem show 01HX3K`; {how}"
        return f"no memory with id {self.memory_id!r}; {how}"


class MemoryGone(UnknownMemory):
    """A memory that exists but is deleted or expired: what happened, when, by whom, why, and how
    to bring it back. An :class:`UnknownMemory`, so callers that only care that it is not there
    catch it as before."""

    def __init__(self, memory_id: str, status: str, at: str, *, by: str = "", reason: str = "") -> None:
        super().__init__(memory_id)
        self.status = status
        self.at = at
        self.by = by
        self.reason = reason

    def __str__(self) -> str:
        return self.told_to("mcp")

    def told_to(self, surface: str) -> str:
        by, reason = _one_line(self.by), _one_line(self.reason)
        if self.status == "expired":
            noted = f"; recorded by {by}" if by else ""
            what = f"expired at {self.at} ({reason or 'its TTL ran out'}{noted})"
        else:
            who = f" by {by}" if by else ""
            why = f" (reason: {reason})" if reason else ""
            what = f"was {self.status} at {self.at}{who}{why}"
        how = {
            "cli": f"`eventmem restore {self.memory_id}`",
            "http": f"POST /api/v1/memories/{self.memory_id}/restore",
        }.get(surface, f"restore_memory or `eventmem restore {self.memory_id}`")
        return f"memory {self.memory_id!r} {what} and is no longer returned; its history is kept: restore it with {how}"


def _one_line(text: str, limit: int = 200) -> str:
    """Journal text (someone else's input) fit for a one-line message: printable, spaces collapsed, cut."""
    clean = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"


class UnknownLink(InvalidInput, KeyError):
    def __init__(self, link_id: str) -> None:
        super().__init__(link_id)
        self.link_id = link_id

    def __str__(self) -> str:
        return f"no relationship with id {self.link_id!r}"


class LimitExceeded(InvalidInput):
    """A size limit would be exceeded; the message says which limit and what to do."""


class SecretRefused(InvalidInput):
    """The text holds a secret and the project's policy refuses rather than scrubs."""


class StaleVersion(EventmemError):
    """A conditional change named a version the memory no longer has (another writer changed it)."""


class JournalCorrupt(EventmemError):
    """A line that is neither a valid event nor a torn tail: reported, never skipped or rewritten."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt line at byte {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class JournalUnwritable(EventmemError):
    """The journal could not be appended to (disk full, read-only, permission denied).

    Nothing was written: a partial line is cut back before this is raised.
    """


class SnapshotDamaged(EventmemError):
    """A memory in the loaded snapshot (derived cache) could not be decoded. The cache is dropped
    and rebuilt from the journal on the next call; nothing is lost."""

    def __init__(self, memory_id: str, reason: str) -> None:
        super().__init__(
            f"the memory cache was damaged (memory {memory_id}: {reason}); it is rebuilt from the journal, "
            "please try again"
        )
        self.memory_id = memory_id


class UnsafePath(InvalidInput):
    """A path eventmem would read or write inside the project is a symbolic link (or leads out of the
    project, or is not a regular file or folder): refused, never followed."""
