"""One table of limits for every field, enforced the same way everywhere.

The MCP tools (their schemas show ``maxLength``, ``minimum`` and ``maximum``), the CLI, the service
and the journal decoder read their bounds from here, so a value a tool would refuse is also what a
merged journal line is reported for. The README's limits table is generated from :data:`LIMITS` and
a test fails when the two drift. No IO here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "CONTENT_BYTES_CEILING",
    "LIMITS",
    "MAX_CHECKED_BLOB_BYTES",
    "MAX_CONFIG_BYTES",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_FILES",
    "MAX_LINE_BYTES",
    "MAX_NESTING",
    "MAX_TTL_SECONDS",
    "SETTING_LIMITS",
    "Limit",
    "in_range",
    "limit",
    "markdown_table",
    "settings_table",
]

Unit = Literal["characters", "bytes", "items", "number", "whole number"]

CONTENT_BYTES_CEILING: Final = 1_048_576
"""``max_memory_bytes`` may be raised up to this; the decoder accepts content up to it."""
MAX_TTL_SECONDS: Final = 100 * 365 * 86_400
"""A TTL is at most 100 years, so no expiry can pass the year 9999 from any accepted timestamp."""
MAX_LINE_BYTES: Final = 8 * 1_048_576
"""A journal line longer than this is reported and skipped without being read whole (the largest
event the tools can write, with every character JSON-escaped, stays below it)."""
MAX_CHECKED_BLOB_BYTES: Final = 256 * 1_048_576
"""``eventmem check`` reads a segment from git only up to this size; a larger one is reported unread."""
MAX_NESTING: Final = 8
"""How deep a journal line's JSON may nest; events nest at most 3 levels."""
MAX_CONFIG_BYTES: Final = 1_048_576
"""A settings file larger than this is refused unread (a real one is a few hundred bytes)."""
MAX_IMPORT_BYTES: Final = 512 * 1_048_576
"""``eventmem import`` refuses a store (a file, or a folder's files together) larger than this, unread."""
MAX_IMPORT_FILES: Final = 100_000
"""``eventmem import`` of a folder of notes reads at most this many files."""


@dataclass(frozen=True, slots=True)
class Limit:
    """The accepted range of one field: a length for text and lists, a value for numbers."""

    name: str
    unit: Unit
    low: float
    high: float
    where: str
    """Which tools, commands and events the field appears in (for the README table)."""
    note: str = ""
    zero_means_off: bool = False
    """0 is accepted too, below ``low``: it turns the feature off."""

    def describe(self) -> str:
        low, high = _show(self.low), _show(self.high)
        if self.unit in ("number", "whole number"):
            off = "0 (off) or " if self.zero_means_off else ""
            return f"{off}a {self.unit} from {low} to {high}"
        if self.low:
            return f"{low} to {high} {self.unit}"
        return f"at most {high} {self.unit}"


def _show(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


LIMITS: Final[dict[str, Limit]] = {
    entry.name: entry
    for entry in (
        Limit(
            "content",
            "bytes",
            1,
            65_536,
            "store_memory, save_context, update_memory, sections; saved/updated events",
            f"the `max_memory_bytes` setting, up to {CONTENT_BYTES_CEILING:,}; must hold a visible character",
        ),
        Limit(
            "title",
            "characters",
            0,
            200,
            "store_memory, update_memory, supersede, project-context entries; saved/updated events",
        ),
        Limit("summary", "characters", 0, 1_000, "store_memory, update_memory, supersede; saved/updated events"),
        Limit("tags", "items", 0, 32, "every tool and command taking tags; saved/updated events"),
        Limit("tag", "characters", 1, 64, "each tag; lower-cased, spaces become -"),
        Limit("importance", "number", 0, 1, "store_memory, update_memory, supersede; saved/updated events"),
        Limit(
            "ttl_seconds",
            "whole number",
            1,
            MAX_TTL_SECONDS,
            "store_memory, update_memory, supersede, `--ttl`; saved/updated events",
            "100 years; null (or absent) is long-term",
        ),
        Limit("reason", "characters", 0, 2_000, "delete, restore, promote, supersede, unlink; their events"),
        Limit("context", "characters", 0, 2_000, "create_relationship; linked events"),
        Limit("relation", "characters", 1, 64, "create_relationship; linked events", "lower_snake_case"),
        Limit("strength", "number", 0, 1, "create_relationship; linked events"),
        Limit("entries", "items", 0, 100, "recentChanges and decisions of the project-context tools"),
        Limit("types", "items", 0, 32, "type filters of recall_memories, search_memories, get_context, `search`"),
        Limit("relations", "items", 0, 32, "get_related_memories"),
        Limit("time", "characters", 0, 64, "created_after/before, updated_after/before (ISO-8601)"),
        Limit("query", "characters", 0, 4_000, "recall_memories, search_memories, retrieve_context, `search`"),
        Limit("limit", "whole number", 1, 100, "recall_memories, search_memories, retrieve_context, `search`"),
        Limit("related_limit", "whole number", 1, 500, "get_related_memories"),
        Limit("depth", "whole number", 1, 5, "get_related_memories"),
        Limit("max_chars", "whole number", 200, 200_000, "get_context"),
        Limit("per_type", "whole number", 0, 100, "get_context"),
        Limit("log_limit", "whole number", 1, 10_000, "`log`, memory_history"),
        Limit("memory_id", "characters", 1, 128, "every tool taking an id; every event", "letters, digits and `:_.-`"),
        Limit("by", "characters", 0, 128, "who wrote an event (client name, `cli`, an import)"),
        Limit("event_id", "characters", 1, 64, "every event"),
        Limit("project", "characters", 0, 200, "a global memory's project; project filters"),
        Limit(
            "metadata",
            "items",
            0,
            64,
            "a memory's metadata (imports, store_memory, update_memory); saved/updated events",
        ),
        Limit(
            "metadata_key",
            "characters",
            1,
            64,
            "each metadata key",
            "letters, digits and `_.-`, starting with a letter or digit",
        ),
        Limit("metadata_value", "characters", 0, 4_096, "each metadata value"),
        Limit("source", "characters", 0, 512, "a memory's original id in the store it was imported from; saved events"),
        Limit("archived_memories", "items", 1, 100_000, "archived events"),
        Limit("segment", "characters", 1, 255, "archived events"),
    )
}


SETTING_LIMITS: Final[dict[str, Limit]] = {
    entry.name: entry
    for entry in (
        Limit("vector_weight", "number", 0, 100, "search", "the vector side's weight in the fusion"),
        Limit("keyword_weight", "number", 0, 100, "search", "the keyword side's weight in the fusion"),
        Limit("importance_boost", "number", -10, 10, "search", "added per unit of importance above 0.5"),
        Limit("recency_boost", "number", -10, 10, "search"),
        Limit("recency_half_life_days", "number", 0.01, 36_500, "search"),
        Limit("max_memory_bytes", "whole number", 64, CONTENT_BYTES_CEILING, "every save", "one memory's text"),
        Limit(
            "max_segment_bytes",
            "whole number",
            1_048_576,
            1_073_741_824,
            "every save and import",
            "a journal segment this size is full: the next write starts a new one",
        ),
        Limit("promote_importance", "number", 0, 1, "lifecycle"),
        Limit("promote_accesses", "whole number", 0, 1_000_000, "lifecycle", "0: never by accesses"),
        Limit(
            "compact_interval_seconds",
            "number",
            1,
            604_800,
            "the MCP server",
            "how often a server expires and archives",
            zero_means_off=True,
        ),
        Limit("archive_after_days", "number", 0, 36_500, "lifecycle"),
        Limit("snapshot_every_events", "whole number", 100, 10_000_000, "the derived state's snapshots"),
        Limit("section_max_bytes", "whole number", 1_024, 16_777_216, "project-context sections"),
    )
}
"""The floor and ceiling of every numeric setting (``.eventmem/config.toml`` and the other settings
files): a tracked value outside is reported and its default used; an untracked one is refused."""


def in_range(entry: Limit, value: float) -> bool:
    """Whether ``value`` is one ``entry`` accepts (NaN never is)."""
    return (entry.zero_means_off and value == 0) or entry.low <= value <= entry.high


def limit(name: str) -> Limit:
    """The limit of one field (a ``KeyError`` names a field the table lacks: a programming error)."""
    return LIMITS[name]


def markdown_table() -> str:
    """The README's limits table (between its ``<!-- limits:start -->`` and ``<!-- limits:end -->``)."""
    rows = ["| field | accepted | where | note |", "|---|---|---|---|"]
    rows += [f"| `{e.name}` | {e.describe()} | {e.where} | {e.note} |" for e in LIMITS.values()]
    return "\n".join(rows) + "\n"


def settings_table() -> str:
    """The settings' ranges as docs/security.md shows them (between ``<!-- settings:start -->`` and
    ``<!-- settings:end -->``)."""
    rows = ["| setting | accepted | used by | note |", "|---|---|---|---|"]
    rows += [f"| `{e.name}` | {e.describe()} | {e.where} | {e.note} |" for e in SETTING_LIMITS.values()]
    return "\n".join(rows) + "\n"
