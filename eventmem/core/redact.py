"""Keep secrets out of the journal: it is committed to git and read in pull requests.

``<private>…</private>`` spans are always dropped. Common secret shapes (cloud keys, tokens,
private keys, passwords in URLs, headers and assignments; the rules are ``data/secret_rules.toml``)
are replaced by ``[REDACTED:<kind>]``, or, with ``secrets = "refuse"`` in the config, the write is
refused with a message naming what was found. :func:`scrub_event` applies this to every free-text
field of an event; the store calls it on everything it appends.
"""

from __future__ import annotations

import re
import threading
import tomllib
from pathlib import Path
from typing import Final, TypeVar

import msgspec

from eventmem.core.errors import SecretRefused
from eventmem.core.events import Event, MemorySaved
from eventmem.core.limits import limit

__all__ = ["find_secrets", "scrub", "scrub_event"]

RULES_FILE: Final = Path(__file__).parent.parent / "data" / "secret_rules.toml"

PRIVATE: Final = re.compile(r"<\s*private\s*>.*?(?:<\s*/\s*private\s*>|\Z)", re.DOTALL | re.IGNORECASE)

#: Characters outside ASCII that Python's case-insensitive matching takes for an ASCII letter
#: (İ ı → i, ſ → s, the Kelvin sign → k): folded before the needles are looked for.
_FOLD: Final = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def _load_rules() -> tuple[tuple[tuple[str, re.Pattern[str]], ...], dict[str, tuple[tuple[str, ...], ...]]]:
    with RULES_FILE.open("rb") as file:
        rules = tomllib.load(file)["rule"]
    patterns: list[tuple[str, re.Pattern[str]]] = []
    needles: dict[str, tuple[tuple[str, ...], ...]] = {}
    for rule in rules:
        source = rule["pattern"]
        source = "".join(source) if isinstance(source, list) else source
        flags = re.DOTALL if rule.get("flags") == "dotall" else 0
        patterns.append((rule["kind"], re.compile(source, flags)))
        needles[rule["kind"]] = tuple(tuple(group) for group in rule["needles"])
    return tuple(patterns), needles


PATTERNS, NEEDLES = _load_rules()
"""The rules in order; and what each pattern cannot match without: every group must have a string in
the text, lower-cased. A pattern whose needles are missing is not run: most texts hold none of them,
and one ``in`` costs far less than a regular expression's scan. Each needle is looked for once."""
_NEEDLES: Final = tuple(sorted({needle for groups in NEEDLES.values() for group in groups for needle in group}))
_RULES: Final = tuple((kind, pattern, NEEDLES[kind]) for kind, pattern in PATTERNS)


def needles_in(text: str) -> frozenset[str]:
    """The needles in ``text``, lower-cased (and folded: see :data:`_FOLD`)."""
    folded = (text if text.isascii() else text.translate(_FOLD)).lower()
    return frozenset([needle for needle in _NEEDLES if needle in folded])


def _found(text: str) -> list[str]:
    present = needles_in(text)
    if not present:
        return []
    return [
        kind
        for kind, pattern, groups in _RULES
        if all(not present.isdisjoint(group) for group in groups) and pattern.search(text)
    ]


def _without_private(text: str) -> str:
    if "private" not in (text if text.isascii() else text.translate(_FOLD)).lower():
        return text
    return PRIVATE.sub("", text)


def find_secrets(text: str) -> list[str]:
    """Kinds of secrets found in ``text`` (after private spans are dropped)."""
    return _found(_without_private(text))


_REDACTED: Final = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def redaction(kind: str, match: re.Match[str]) -> str:
    """The match with its secret part (the group named ``secret…`` that took part, else all of it)
    replaced by ``[REDACTED:<kind>]``."""
    tag = f"[REDACTED:{kind}]"
    for name, value in match.groupdict().items():
        if name.startswith("secret") and value is not None:
            if _REDACTED.fullmatch(value):  # already replaced by an earlier rule: keep its kind
                return match.group(0)
            start, end = match.span(name)
            whole = match.group(0)
            return whole[: start - match.start()] + tag + whole[end - match.start() :]
    return tag


def _redact(text: str) -> str:
    for kind, pattern, groups in _RULES:
        present = needles_in(text)  # (again after each rule: a replacement adds text)
        if all(not present.isdisjoint(group) for group in groups):
            text = pattern.sub(lambda match, kind=kind: redaction(kind, match), text)  # type: ignore[misc]
    return text


_recent = threading.local()
"""Per thread, the last few strings :func:`scrub` returned (held, so an id is never reused): the
service scrubs a text when it checks it, and :func:`scrub_event` need not scan that same object again."""
_RECENT_KEPT: Final = 4


def _remember(text: str) -> str:
    kept: list[str] = getattr(_recent, "texts", [])
    _recent.texts = [text, *kept[: _RECENT_KEPT - 1]]
    return text


def _scrubbed_here(text: str) -> bool:
    return any(text is kept for kept in getattr(_recent, "texts", ()))


def scrub(text: str, *, refuse: bool = False, field: str = "text") -> str:
    """``text`` without private spans and secrets; raises :class:`SecretRefused` if ``refuse``."""
    text = _without_private(text)
    found = _found(text)
    if not found:
        return _remember(text)
    if refuse:
        raise SecretRefused(
            f"the {field} looks like it holds a secret ({', '.join(found)}); the journal is committed "
            "to git, so remove it (or wrap it in <private>…</private> to drop it) and save again"
        )
    return _remember(_redact(text))


#: Fields that hold ids, times and closed vocabularies, never free text: not scrubbed.
NOT_FREE_TEXT: Final = frozenset(
    {
        "id",
        "ts",
        "prev",
        "memory",
        "memories",
        "kind",
        "scope",
        "link",
        "source",
        "target",
        "relation",
        "segment",
        "expires_at",
    }
)
#: The limit (:mod:`eventmem.core.limits`) of each free-text field a redaction marker could push past it.
_BOUNDED: Final = {
    "title": "title",
    "summary": "summary",
    "reason": "reason",
    "context": "context",
    "by": "by",
    "source": "source",
}

E = TypeVar("E", bound=Event)


def _text_fields(event: Event) -> list[str]:
    """The names of ``event``'s free-text fields (a memory's ``source`` is free text, a link's an id)."""
    return [
        name
        for name in event.__struct_fields__
        if name not in NOT_FREE_TEXT or (name == "source" and isinstance(event, MemorySaved))
    ]


def _free_text(event: Event) -> list[str]:
    out: list[str] = []
    for name in _text_fields(event):
        value = getattr(event, name)
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(item for item in value if isinstance(item, str))
        elif isinstance(value, dict):
            out.extend(item for item in value.values() if isinstance(item, str))
            out.extend(key for key in value if isinstance(key, str))  # (a token pasted as a key)
    return out


def _scrubbed_key(key: str, *, refuse: bool, field: str, taken: dict[str, str]) -> str:
    """A metadata key, or in place of a key that is a secret ``redacted-<kind>`` (a valid key:
    a redaction marker's brackets are not), numbered when two would be the same."""
    found = _found(key)
    if not found:
        return key
    if refuse:
        raise SecretRefused(
            f"a key of {field} looks like a secret ({', '.join(found)}); the journal is committed to git, "
            "so remove it and save again"
        )
    name, number = f"redacted-{found[0]}", 1
    while name in taken:
        number += 1
        name = f"redacted-{found[0]}-{number}"
    return name


def scrub_event(event: E, *, refuse: bool = False) -> E:
    """``event`` with every free-text field scrubbed (strings and tuples of strings: content, title,
    summary, tags, reasons, a link's context, ``by``, …); the same object when nothing changed.
    With ``refuse``, raises :class:`SecretRefused` naming the first field that holds a secret."""
    texts = [value for value in _free_text(event) if value and not _scrubbed_here(value)]
    if not texts:
        return _fitted(event)
    joined = "\x00".join(texts)  # (no needle holds a NUL: none can span two fields)
    if "private" not in (joined if joined.isascii() else joined.translate(_FOLD)).lower() and not needles_in(joined):
        return _fitted(event)  # the common case: one look for the needles across all the fields
    changes: dict[str, object] = {}
    for name in _text_fields(event):
        value = getattr(event, name)
        if isinstance(value, dict):
            values: dict[str, str] = {}
            for key, item in value.items():
                clean_key = _scrubbed_key(key, refuse=refuse, field=name, taken=values)
                values[clean_key] = scrub(item, refuse=refuse, field=f"{name}.{clean_key}")
            if values != value or list(values) != list(value):
                changes[name] = values
        elif isinstance(value, str):
            clean = scrub(value, refuse=refuse, field=name)
            if clean != value:
                changes[name] = clean
        elif isinstance(value, tuple) and value and all(isinstance(item, str) for item in value):
            items = tuple(scrub(item, refuse=refuse, field=name) for item in value)
            if items != value:
                changes[name] = items
    return _fitted(msgspec.structs.replace(event, **changes) if changes else event)


def _fitted(event: E) -> E:
    """``event`` with each bounded text cut to its limit: a redaction marker is longer than some
    secrets, and the stored event must stay one its readers accept (the text was within its limit
    when given)."""
    changes: dict[str, object] = {}
    for name, limit_name in _BOUNDED.items():
        value = getattr(event, name, None)
        if isinstance(value, str) and len(value) > (most := int(limit(limit_name).high)):
            changes[name] = value[: most - 1] + "…"
    metadata = getattr(event, "metadata", None)
    most = int(limit("metadata_value").high)
    if isinstance(metadata, dict) and any(len(value) > most for value in metadata.values()):
        changes["metadata"] = {
            key: value if len(value) <= most else value[: most - 1] + "…" for key, value in metadata.items()
        }
    tags = getattr(event, "tags", None)
    if isinstance(tags, tuple) and any(len(tag) > limit("tag").high for tag in tags):
        most = int(limit("tag").high)
        changes["tags"] = tuple(tag if len(tag) <= most else tag[: most - 1] + "…" for tag in tags)
    return msgspec.structs.replace(event, **changes) if changes else event
