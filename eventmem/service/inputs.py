"""Checks on what callers pass the service: every argument is untrusted, and a refusal says what was wrong.

The limits are those of :data:`eventmem.core.limits.LIMITS`; the checks themselves are
:mod:`eventmem.core.validation`'s."""

from __future__ import annotations

import re
from collections.abc import Sequence

from eventmem.core.errors import InvalidInput, LimitExceeded
from eventmem.core.events import KINDS, RELATIONS
from eventmem.core.limits import LIMITS
from eventmem.core.redact import scrub
from eventmem.core.sections import singleton_of_kind
from eventmem.core.validation import check_count, check_length, check_number, check_whole, has_visible, refusal
from eventmem.journal.config import Config


def normalize_tags(tags: Sequence[str] | None) -> tuple[str, ...]:
    """Lower-cased, spaces to ``-``, duplicates dropped; the count is checked before any tag is read."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        check_length(tags, "tags", high=LIMITS["tags"].high * (LIMITS["tag"].high + 1))
        tags = tags.split(",")
    check_count(tags, "tags")
    out: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise refusal("tags", "a list of strings", tag, got=f"a {type(tag).__name__} among them")
        check_length(tag, "tag")
        # scrubbed before lower-casing, which would hide a token's shape from the store's scrub
        clean = " ".join(scrub(tag, field="tag").strip().lower().split()).replace(" ", "-")
        if clean:
            out[clean] = None
    return tuple(out)


def check_kind(kind: str) -> str:
    if not isinstance(kind, str) or len(kind) > 64:
        raise refusal("type", "one of: " + ", ".join(KINDS), kind)
    kind = kind.strip().lower().replace("-", "_").replace(" ", "_")
    if kind not in KINDS:
        raise InvalidInput(f"unknown type {kind!r}; choose one of: {', '.join(KINDS)}")
    return kind


def check_importance(value: float) -> float:
    return check_number(value, "importance")


_RELATION = re.compile(r"[a-z][a-z0-9_]{0,63}")


def check_relation(value: str) -> str:
    """A well-known relation (any case) or a free-form lower_snake_case one."""
    check_length(value, "relation")
    relation = value.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(value, str) else ""
    if not _RELATION.fullmatch(relation):
        raise InvalidInput(
            f"relation {value!r} is not valid: use one of {', '.join(r.upper() for r in RELATIONS)}, or a "
            "free-form lower_snake_case name (letters, digits and _, starting with a letter, up to 64)"
        )
    return relation


def check_query(query: str) -> str:
    """A recall's question: within the length limit, with a visible character."""
    check_length(query, "query")
    if not has_visible(query):
        raise refusal("query", "a text with a visible character", query)
    return query


def check_mode(mode: str) -> str:
    if mode not in ("hybrid", "vector", "keyword"):
        raise InvalidInput("mode must be 'hybrid', 'vector' or 'keyword'")
    return mode


def check_order(text: str, mode: str, sort: str | None) -> str:
    """A search's ``mode`` checked, and the order of its answers: ``sort``, else by relevance with a
    query and by importance without one."""
    check_mode(mode)
    order = sort or ("relevance" if text else "importance")
    if order not in ("relevance", "importance", "recent"):
        raise InvalidInput("sort must be 'relevance', 'importance' or 'recent'")
    if order == "relevance" and not text:
        raise InvalidInput("sort 'relevance' needs a query; without one, sort by 'importance' or 'recent'")
    return order


def check_walk(depth: int, limit: int, direction: str, relations: Sequence[str] | None) -> tuple[int, int, list[str]]:
    """``related``'s arguments checked: (depth, limit, the relations asked for)."""
    depth = check_whole(depth, "depth")
    limit = check_whole(limit, "related_limit", "limit")
    if direction not in ("out", "in", "both"):
        raise InvalidInput("direction must be 'out' (links from the memory), 'in' (links to it) or 'both'")
    return depth, limit, [check_relation(r) for r in check_count(relations or (), "relations")]


def check_ttl(value: int | None) -> int | None:
    """Seconds, or ``None`` for long-term; at most :data:`eventmem.core.limits.MAX_TTL_SECONDS`."""
    if value is None:
        return None
    return check_whole(value, "ttl_seconds")


def check_by(value: str) -> str:
    return check_length(value, "by")


def check_utf8(text: str, field: str) -> str:
    """``text`` if it can be written as UTF-8; else :class:`InvalidInput` naming where it cannot (a
    command-line argument of bytes that are not UTF-8 arrives holding lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{field} is not UTF-8 text: character {exc.start + 1} of {len(text)} is not a character; "
            "save text in UTF-8"
        ) from None
    return text


def clean_text(config: Config, text: str, field: str, *, required: bool) -> str:
    """Scrubbed and stripped text within its limit: its field's in :data:`~eventmem.core.limits.LIMITS`
    (``content``, ``context_text`` and unknown fields: the ``max_memory_bytes`` setting)."""
    if not isinstance(text, str):
        raise refusal(field, "a string", text)
    if field in LIMITS and field != "content":
        check_length(text, field)  # before the scrub reads it
    elif len(text) > config.max_memory_bytes:  # a character is at least a byte
        raise LimitExceeded(
            f"{field} is over {config.max_memory_bytes} bytes; the limit is {config.max_memory_bytes} "
            "bytes (max_memory_bytes). Save the essential part, split it into several memories, "
            "or give a summary and keep the details in the repository."
        )
    check_utf8(text, field)
    cleaned = scrub(text, refuse=config.secrets == "refuse", field=field).strip()
    if required and not has_visible(cleaned):
        raise refusal(field, "a text with a visible character", text)
    size = len(cleaned.encode("utf-8"))
    if size > config.max_memory_bytes:
        raise LimitExceeded(
            f"{field} is {size} bytes; the limit is {config.max_memory_bytes} bytes "
            "(max_memory_bytes). Save the essential part, split it into several memories, "
            "or give a summary and keep the details in the repository."
        )
    return cleaned


def refuse_second_singleton(memory_id: str, kind: str) -> None:
    """A singleton type belongs to one memory, its section's: no other memory may take it on."""
    section = singleton_of_kind(kind)
    if section is not None and memory_id != section.memory_id:
        raise SecondSingleton(kind, section.key, section.memory_id)


class SecondSingleton(InvalidInput):
    """A memory was to take on a singleton section's type: that section has one memory."""

    def __init__(self, kind: str, key: str, memory_id: str) -> None:
        super().__init__(kind)
        self.kind, self.key, self.memory_id = kind, key, memory_id

    def __str__(self) -> str:
        return self.told_to("mcp")

    def told_to(self, surface: str) -> str:
        how = {
            "cli": f"`eventmem save --type {self.kind} TEXT`",
            "http": f"POST /api/v1/memories with type {self.kind}",
        }.get(surface, f"store_memory type {self.kind} or update_context_section")
        return (
            f"type {self.kind} is the project-context section {self.key}, one memory ({self.memory_id}): "
            f"change it with {how}, not by making another one"
        )
