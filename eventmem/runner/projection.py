"""From the fold to the projectors: which memories changed, as :class:`Batch` es.

After a catch-up folds events, :func:`sync` gives every memory the fold touched (and those a
``supersedes`` link from them points at) to the columns projector, and the memories whose text
changed to the keyword and vector projectors; with a server's deferral the texts go in just after
the reply. :func:`sync_all` does the same for a runner with no slot yet (a rebuild, a start without
a snapshot), in bulk: the same projector code over one batch of every visible memory.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable
from itertools import chain

import msgspec

from eventmem.core.codec import UnknownEvent
from eventmem.core.events import AnyEvent, MemorySaved, MemoryUpdated
from eventmem.core.records import MemoryRecord
from eventmem.embedders.embedcache import HASH_BYTES
from eventmem.projectors.base import Batch, Projected
from eventmem.projectors.keywords import UPSERT_BESIDE_FROM
from eventmem.projectors.vectors import EmbedItem, embed_text
from eventmem.runner.deferral import Deferral
from eventmem.runner.derived import Derived
from eventmem.runner.embedding import EmbeddingQueue

__all__ = ["apply_local", "index_texts", "projected", "records_before", "sync", "sync_all"]


def projected(derived: Derived, record: MemoryRecord) -> Projected:
    """A visible memory as the projectors see it."""
    expires = math.inf if record.ttl_seconds is None else derived.expires_epoch(record.id, record)
    superseded = record.id in derived.state.adjacency and is_superseded(derived, record.id)
    return Projected(record, superseded, expires)


def index_texts(derived: Derived, texts: Batch, items: list[EmbedItem]) -> None:
    if texts.upserts:
        derived.keywords.apply(texts)  # (a large batch is written by a thread meanwhile)
    derived.vectors.embed(items)
    derived.keywords.settle()


def records_before(derived: Derived, events: Iterable[AnyEvent | UnknownEvent]) -> dict[str, MemoryRecord]:
    """Copies of the records of the memories with a slot whose texts ``events`` may change, as the
    fold holds them before it folds them: the keyword index, which keeps no copy of the texts,
    deletes their rows with them (see :attr:`Batch.previous`). Taken just before the fold."""
    if not len(derived.table):
        return {}
    memories, of = derived.state.memories, derived.table.of
    before: dict[str, MemoryRecord] = {}
    for event in events:
        if isinstance(event, MemorySaved | MemoryUpdated) and event.memory in of and event.memory not in before:
            record = memories.get(event.memory)
            if record is not None:  # (a copy: the fold changes records in place)
                before[event.memory] = msgspec.structs.replace(record)
    return before


def apply_local(derived: Derived, events: Iterable[AnyEvent], embedding: EmbeddingQueue, deferral: Deferral) -> None:
    """Fold in events this process just appended and bring the projections in step (the texts after
    the reply, when ``deferral`` is enabled), without waiting for the next catch-up."""
    events = list(events)
    before = records_before(derived, events)
    touched = set(derived.state.written(events))
    sync(derived, touched, embedding, deferral, defer_index=deferral.enabled, before=before)


def sync(
    derived: Derived,
    touched: set[str],
    embedding: EmbeddingQueue,
    deferral: Deferral,
    *,
    defer_index: bool = False,
    before: dict[str, MemoryRecord] | None = None,
) -> None:
    """Bring slots, columns, tags and the indexes in step with the fold for ``touched``; with
    ``defer_index`` the new texts reach the keyword and vector indexes after the reply (through ``deferral``).
    ``before``: the records the fold changed the texts of, as they were (:func:`records_before`)."""
    deferral.run()  # earlier texts first: the indexes take changes in order
    state = derived.state
    derived.changed.update(touched)
    # a memory's "superseded" flag depends on its superseder being alive
    for memory_id in list(touched):
        for link in state.links_of(memory_id):
            if link.relation == "supersedes":
                touched.add(link.target)
    removed: list[int] = []
    removals: list[str] = []
    upserts: list[Projected] = []
    to_embed: list[EmbedItem] = []
    texts: list[Projected] = []
    table, hashes = derived.table, derived.slot_hashes
    live = derived.columns.visible()
    for memory_id in touched:
        record = state.visible(memory_id)
        slot = table.get(memory_id)
        if record is None:
            if slot is not None and live[slot]:
                removals.append(memory_id)
                removed.append(slot)
                hashes[slot] = b""
            continue
        if slot is None:
            slot, _ = table.assign(memory_id)
            hashes.append(b"")
            was_live = False
        else:
            was_live = bool(live[slot])
        text = embed_text(record)
        text_hash, digest = text_hashes(text, record)
        memory = projected(derived, record)
        if hashes[slot] != digest or not was_live:
            to_embed.append((slot, text, text_hash))
            texts.append(memory)
            hashes[slot] = digest
        upserts.append(memory)
    # the texts the keyword rows removed or replaced were made from: as they were before the fold
    # when it changed them, or as the fold holds them (a batch deferred holds the fold's records,
    # which the fold that came before it ran changed in place)
    before = before or {}
    previous = {
        memory_id: (*((before[memory_id],) if memory_id in before else ()), state.memories[memory_id])
        for memory_id in chain(removals, (memory.record.id for memory in texts))
    }
    deferred = defer_index and bool(texts or to_embed)
    if not deferred and len(texts) >= UPSERT_BESIDE_FROM:
        # many texts (a merged branch): their keyword rows are written by a thread (see
        # KeywordIndex.change_beside) while this one makes the columns and hands the vectors on
        derived.keywords.apply(Batch(tuple(texts), tuple(removals), previous=previous))
        derived.columns.apply(Batch(tuple(upserts), tuple(removals)))
        if removed:
            embedding.forget(removed)
            derived.vectors.apply(Batch((), tuple(removals)))
        index_texts(derived, Batch((), ()), to_embed)
        return
    derived.columns.apply(Batch(tuple(upserts), tuple(removals)))
    if removed:
        embedding.forget(removed)
        gone = Batch((), tuple(removals), previous=previous)
        derived.vectors.apply(gone)
        derived.keywords.apply(gone)
    changed = Batch(tuple(texts), (), previous=previous)
    if deferred:
        deferral.defer(functools.partial(index_texts, derived, changed, to_embed))
    else:
        index_texts(derived, changed, to_embed)


def sync_all(derived: Derived, touched: set[str], *, encode_ahead: bool = False) -> None:
    """:func:`sync` for a derived state with no slot yet (a rebuild, a start without a snapshot): every
    visible memory gets a slot in the fold's order, with the same columns, hashes, keyword rows
    and vectors as :func:`sync` would give it, made in bulk. The keyword index is filled by a
    thread (SQLite works without the GIL) while this one hashes the texts and makes the columns and
    vectors; with ``encode_ahead`` (a snapshot is to be taken now) the fold is encoded meanwhile too."""
    state = derived.state
    derived.changed.update(touched)
    slot_ids: list[str] = []
    records: list[MemoryRecord] = []
    try:
        for memory_id, record in state.memories.items():
            if not record.exists or ((record.deleted_stamp or record.expired_stamp) and record.status != "live"):
                continue
            slot_ids.append(memory_id)
            records.append(record)
        derived.table.extend(slot_ids)
        batch = Batch(tuple(map(functools.partial(projected, derived), records)), ())
        # the keyword rows first: what the first answer waits for is begun before the texts are hashed
        derived.keywords.load(batch)  # (a large one from a thread, while this one goes on)
        slot_hashes = derived.slot_hashes
        to_embed: list[EmbedItem] = []
        for slot, record in enumerate(records):
            text = embed_text(record)
            text_hash, digest = text_hashes(text, record)
            slot_hashes.append(digest)
            to_embed.append((slot, text, text_hash))
        derived.columns.load(batch)
        derived.vectors.embed(to_embed)  # (what its load would embed, hashed above in the same pass)
        if encode_ahead and derived.keywords.loading:
            try:
                derived.encoded_state = (state, len(state.seen), msgspec.msgpack.encode(state))
            except OverflowError:  # (no snapshot then: see snapshots.take)
                derived.encoded_state = None
    finally:
        derived.keywords.settle()


def text_hashes(text: str, record: MemoryRecord) -> tuple[bytes, bytes]:
    """``content_hash(text)`` (the embedding cache's key, ``text`` the record's :func:`embed_text`)
    and a slot's digest (unchanged means no re-index): of that text and the record's keyword texts,
    each apart (``text`` alone does not tell a title from a body: the keyword row, which is deleted
    with the texts it was made from, must change whenever they do)."""
    hasher = hashlib.blake2b(text.encode("utf-8"), digest_size=HASH_BYTES)
    text_hash = hasher.digest()
    # the lengths of the parts ``text`` joins tell them apart: with the summary, the keyword texts
    parts = f"{len(record.title)} {len(record.content)} {len(' '.join(record.tags))}"
    hasher.update(b"\x00" + record.summary.encode("utf-8") + b"\x00" + parts.encode("ascii"))
    return text_hash, hasher.digest()


def is_superseded(derived: Derived, memory_id: str) -> bool:
    return any(
        link.relation == "supersedes" and link.target == memory_id and derived.state.visible(link.source)
        for link in derived.state.links_of(memory_id)
    )
