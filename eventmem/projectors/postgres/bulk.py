"""Bulk writes: rows sent by binary ``COPY``, vectors in pgvector's own binary form.

A vector's text form costs a shortest-repr conversion per float (3 s of a 10,000-memory load, measured);
its binary form (``vector_recv``: two 16-bit words, the dimension and zero, then big-endian float32s)
is one array conversion. The values are the same float32s either way.

Measured (``eventmem sync``'s runner, the hashing embedder, a loaded 2-core machine): a first sync of
10,000 memories went from 333 and 480 events/s to 624 and 824 (runs alternated), its time beside the
embedding from 12-15 s to 5-6 s; of 100,000 memories from 135 events/s (739 s, the HNSW graph spilling
out of the default 64 MB) to 454 (220 s).
"""

from __future__ import annotations

import itertools
import operator
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg.adapt import Dumper
from psycopg.pq import Format

from eventmem.projectors.postgres.keywords import memory_number

if TYPE_CHECKING:
    import numpy.typing as npt
    import psycopg

__all__ = [
    "EVENT_TYPES",
    "MEMORY_TYPES",
    "POSTING_COLUMNS",
    "RealArray",
    "TextArray",
    "VectorBytes",
    "copy_data",
    "copy_rows",
    "pg_name",
    "pg_text",
    "postings_data",
    "real_array",
    "register_arrays",
    "register_vectors",
    "text_array",
    "vector_bytes",
]

MEMORY_TYPES: tuple[str, ...] = (
    *("text",) * 8,  # project, id, branch, kind, scope, title, content, summary
    "text[]",  # tags
    "float8",  # importance
    "numeric",  # ttl_seconds
    "text",  # origin_project
    "float8",  # created_at
    "float8",  # updated_at
    "text",  # created_by
    "text",  # updated_by
    "float8",  # expires_at
    "bool",  # superseded
    "bool",  # archived
    "int4",  # event_count
    "bytea",  # record
)
"""The types of eventmem_memories' columns but the last (the embedding, whose oid the database says)."""
EVENT_TYPES: tuple[str, ...] = ("text", "text", "text", "text", "bytea")
"""eventmem_events: project, id, type, ts, line."""


def pg_text(text: str) -> str:
    """``text`` as a PostgreSQL text value holds it: NUL (refused there) as U+FFFD."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def pg_name(text: str) -> str:
    """A file system name or path as text: undecodable bytes (lone surrogates) as ``\\udcXX``."""
    return pg_text(text.encode("utf-8", "backslashreplace").decode("utf-8"))


class VectorBytes(bytes):
    """A vector in pgvector's binary form."""


class _VectorDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


def vector_bytes(vectors: npt.NDArray[np.float32]) -> list[VectorBytes]:
    """Each row of ``vectors`` in pgvector's binary form."""
    if len(vectors) == 0:
        return []
    header = np.array([vectors.shape[1], 0], ">u2").tobytes()
    rows = np.ascontiguousarray(vectors, dtype=">f4")
    return [VectorBytes(header + row.tobytes()) for row in rows]


class TextArray(bytes):
    """A ``text[]`` in PostgreSQL's binary form (:func:`text_array`)."""


class RealArray(bytes):
    """A ``real[]`` in PostgreSQL's binary form (:func:`real_array`)."""


_TEXT_OID, _TEXT_ARRAY_OID, _REAL_OID, _REAL_ARRAY_OID = 25, 1009, 700, 1021


def text_array(items: Sequence[str]) -> TextArray:
    """``items`` as a one-dimensional ``text[]`` in binary form: the array's header, then each
    element's length and UTF-8 bytes (psycopg's own dumper walks the list in Python, measured at
    a seventh of a first sync for a row's stems and frequencies)."""
    if not items:
        return TextArray(struct.pack(">iii", 0, 0, _TEXT_OID))
    if len(_FIELDS) > _FIELDS_KEPT:
        _FIELDS.clear()
    fields = _FIELDS
    return TextArray(
        struct.pack(">iiiii", 1, 0, _TEXT_OID, len(items), 1)
        + b"".join([fields.get(item) or _field(item) for item in items])
    )


_FIELDS: dict[str, bytes] = {}
"""Each text element's binary form (its length, then its UTF-8 bytes), kept: a stem is in many rows,
and every posting names one (measured: the stems' arrays of 5,000 memories, 655,000 elements, in
0.26 s of CPU instead of 0.33; their postings, :func:`postings_data`, in 0.8 s)."""
_FIELDS_KEPT = 500_000


def _field(item: str) -> bytes:
    data = item.encode("utf-8")
    field = _FIELDS[item] = len(data).to_bytes(4, "big") + data
    return field


def real_array(values: Sequence[float]) -> RealArray:
    """``values`` as a one-dimensional ``real[]`` in binary form (each element: its length, 4, and
    its big-endian float32)."""
    if not len(values):
        return RealArray(struct.pack(">iii", 0, 0, _REAL_OID))
    data = np.empty(len(values), dtype=[("length", ">i4"), ("value", ">f4")])
    data["length"] = 4
    data["value"] = values
    return RealArray(struct.pack(">iiiii", 1, 0, _REAL_OID, len(values), 1) + data.tobytes())


def register_arrays(conn: psycopg.Connection[Any]) -> None:
    """Teach ``conn`` to send :class:`TextArray` and :class:`RealArray` as they are. A binary ``COPY``
    on ``conn`` then takes its ``text[]`` and ``real[]`` columns in these forms only."""
    for kind, oid in ((TextArray, _TEXT_ARRAY_OID), (RealArray, _REAL_ARRAY_OID)):
        conn.adapters.register_dumper(kind, type(f"{kind.__name__}Dumper", (_VectorDumper,), {"oid": oid}))


def register_vectors(conn: psycopg.Connection[Any]) -> int:
    """Teach ``conn`` to send :class:`VectorBytes` as the embedding column's type; returns its oid."""
    with conn.transaction():
        row = conn.execute(
            "SELECT atttypid FROM pg_attribute WHERE attrelid = 'eventmem_memories'::regclass AND attname = 'embedding'"
        ).fetchone()
    assert row is not None, "the schema has no embedding column"
    oid = int(row[0])
    conn.adapters.register_dumper(VectorBytes, type("VectorBinaryDumper", (_VectorDumper,), {"oid": oid}))
    return oid


def copy_rows(
    cursor: psycopg.Cursor[Any], table: str, columns: str, types: Sequence[str | int], rows: Iterable[Sequence[object]]
) -> None:
    """Append ``rows`` to ``table`` by one binary ``COPY`` (in the cursor's transaction)."""
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)


POSTING_COLUMNS = "project, memory, tokens, stem, freq"
"""eventmem_postings' columns in the order :func:`postings_data` writes them."""
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)
_TRAILER = b"\xff\xff"
_FIVE_FIELDS = (5).to_bytes(2, "big") + b"\x00\x00\x00\x04"
"""A posting row's field count, then the project's length."""
_FOUR = b"\x00\x00\x00\x04"
_EIGHT = b"\x00\x00\x00\x08"
_PREFIX = 30
"""A posting row's bytes before its stem: the field count (2), then the project, the memory's number and
its tokens, each after its length (8, 12 and 8)."""
_VALUE = 8
"""A posting row's bytes after its stem: the frequency after its length."""


def postings_data(project: int, memories: Iterable[tuple[str, int, Sequence[str], Sequence[float]]]) -> bytes:
    """The keyword postings of ``memories`` (id, tokens, stems, frequencies) of the project numbered
    ``project`` as one binary ``COPY`` stream of :data:`POSTING_COLUMNS`: a row a stem, made here in
    bulk from each memory's fields (psycopg's ``write_row`` costs a few microseconds a row, and a
    memory has about 130 postings), each naming its memory by :func:`memory_number`. The rows come in
    the order of the postings' key within one project (by stem, byte by byte as its ``COLLATE "C"``
    compares, which is the order of the code points Python sorts ``str`` by, then by memory number),
    so that inserting them into the key's index walks its pages once, in order, instead of at random
    (measured: a merged branch's postings of 10,000 events onto 20,000 memories copied in 7.9 s
    instead of 12.7). A load's postings are made by the server instead (``_POSTINGS_OF_ROWS``).

    The rows are laid out by numpy, not a row at a time: each row is its memory's fields before the
    stem (:data:`_PREFIX` bytes), its stem's field, then its frequency's (:data:`_VALUE` bytes), each
    copied into place for all rows at once (measured: 180,000 postings in 67-76 ms instead of
    139-151, the same bytes; numpy's copies leave the interpreter to the sync's other thread)."""
    rows = sorted(((memory_number(m), t, s, f) for m, t, s, f in memories), key=operator.itemgetter(0))
    counts = np.fromiter((len(row[2]) for row in rows), np.int64, len(rows))
    total = int(counts.sum())
    if not total:
        return _SIGNATURE + _TRAILER
    # each memory's fields before the stem: the field count, the project, its number and its tokens
    prefix = np.empty((len(rows), _PREFIX), np.uint8)
    prefix[:, :14] = np.frombuffer(_FIVE_FIELDS + project.to_bytes(4, "big", signed=True) + _EIGHT, np.uint8)
    prefix[:, 14:22] = np.array([row[0] for row in rows], ">i8").view(np.uint8).reshape(-1, 8)
    prefix[:, 22:26] = np.frombuffer(_FOUR, np.uint8)
    prefix[:, 26:30] = np.array([row[1] for row in rows], ">i4").view(np.uint8).reshape(-1, 4)
    # each stem numbered once, and ranked by the key's order; the postings sorted by stem, then memory
    numbered: dict[str, int] = {}
    stems = np.fromiter((numbered.setdefault(s, len(numbered)) for row in rows for s in row[2]), np.int64, total)
    names = list(numbered)
    rank = np.empty(len(names), np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    holders = np.repeat(np.arange(len(rows)), counts)
    order = np.lexsort((holders, rank[stems]))
    stems, holders = stems[order], holders[order]
    freqs = np.fromiter(itertools.chain.from_iterable(row[3] for row in rows), ">f4", total)[order]
    fields = [_FIELDS.get(name) or _field(name) for name in names]
    field_sizes = np.fromiter(map(len, fields), np.int64, len(fields))
    field_starts = np.cumsum(field_sizes) - field_sizes
    sizes = field_sizes[stems]
    starts = np.cumsum(_PREFIX + sizes + _VALUE) - (_PREFIX + sizes + _VALUE)
    out = np.empty(int(starts[-1] + _PREFIX + sizes[-1] + _VALUE), np.uint8)
    out[starts[:, None] + np.arange(_PREFIX)] = prefix[holders]
    value = np.empty((total, _VALUE), np.uint8)
    value[:, :4] = np.frombuffer(_FOUR, np.uint8)
    value[:, 4:] = freqs.view(np.uint8).reshape(-1, 4)
    out[(starts + _PREFIX + sizes)[:, None] + np.arange(_VALUE)] = value
    # the stems' fields, of as many sizes as stems: each byte taken from its stem's field
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    out[np.repeat(starts + _PREFIX, sizes) + within] = np.frombuffer(b"".join(fields), np.uint8)[
        np.repeat(field_starts[stems], sizes) + within
    ]
    if len(_FIELDS) > _FIELDS_KEPT:
        _FIELDS.clear()
    return _SIGNATURE + out.tobytes() + _TRAILER


def copy_data(cursor: psycopg.Cursor[Any], table: str, columns: str, data: bytes) -> None:
    """Append a whole binary ``COPY`` stream (signature, rows, trailer) to ``table``."""
    with cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(data)


BULK_TABLES = ("eventmem_memories", "eventmem_postings")
"""The tables a bulk write fills with their secondary indexes dropped (:func:`secondary_indexes`)."""


def secondary_indexes(cursor: psycopg.Cursor[Any], tables: Sequence[str] = BULK_TABLES) -> list[tuple[str, str]]:
    """(name, definition) of every index of ``tables`` but their keys (a primary key, a constraint's
    index: an upsert needs them), as the catalog holds it (``pg_get_indexdef``), so that whatever index
    the schema defines is made again as it was."""
    rows = cursor.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) ORDER BY 1",
        [list(tables)],
    ).fetchall()
    return [(str(name), str(definition)) for name, definition in rows]


def drop_indexes(cursor: psycopg.Cursor[Any], indexes: Sequence[tuple[str, str]]) -> None:
    """Drop these indexes (in the cursor's transaction: a rollback brings them back)."""
    if indexes:
        cursor.execute("DROP INDEX " + ", ".join(name for name, _ in indexes))


def create_indexes(cursor: psycopg.Cursor[Any], indexes: Sequence[tuple[str, str]], memory_mb: int) -> None:
    """Make these indexes again from their definitions, each given ``memory_mb`` of memory to sort or
    build its graph in (for the rest of the transaction) and the server's parallel workers."""
    cursor.execute(f"SET LOCAL maintenance_work_mem = '{int(memory_mb)}MB'")
    for _, definition in indexes:
        cursor.execute(definition)
