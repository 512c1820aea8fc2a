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
from typing import TYPE_CHECKING

import msgspec

from eventmem.core.records import MemoryRecord
from eventmem.embedders.embedcache import HASH_BYTES, content_hash
from eventmem.projectors.base import Batch, Projected
from eventmem.projectors.vectors import EmbedItem, embed_text

if TYPE_CHECKING:
    from eventmem.runner.runner import Store

__all__ = ["index_texts", "projected", "sync", "sync_all"]


def projected(store: Store, record: MemoryRecord) -> Projected:
    """A visible memory as the projectors see it."""
    expires = math.inf if record.ttl_seconds is None else store.expires_epoch(record.id, record)
    superseded = record.id in store.state.adjacency and is_superseded(store, record.id)
    return Projected(record, superseded, expires)


def index_texts(store: Store, texts: Batch, items: list[EmbedItem]) -> None:
    if texts.upserts:
        store.keywords.apply(texts)
    store.vectors.embed(items)


def sync(store: Store, touched: set[str], *, defer_index: bool = False) -> None:
    """Bring slots, columns, tags and the indexes in step with the fold for ``touched``; with
    ``defer_index`` the new texts reach the keyword and vector indexes after the reply (:meth:`defer`)."""
    store.deferral.run()  # earlier texts first: the indexes take changes in order
    state = store.state
    store.changed.update(touched)
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
    table, hashes = store.table, store.slot_hashes
    live = store.columns.visible()
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
        digest = content_hash(text + "\x00" + record.summary)
        memory = projected(store, record)
        if hashes[slot] != digest or not was_live:
            to_embed.append((slot, text, content_hash(text)))
            texts.append(memory)
            hashes[slot] = digest
        upserts.append(memory)
    store.columns.apply(Batch(tuple(upserts), tuple(removals)))
    if removed:
        store.embedding.forget(removed)
        gone = Batch((), tuple(removals))
        store.vectors.apply(gone)
        store.keywords.apply(gone)
    changed = Batch(tuple(texts), ())
    if defer_index and (texts or to_embed):
        store.defer(functools.partial(index_texts, store, changed, to_embed))
    else:
        index_texts(store, changed, to_embed)


def sync_all(store: Store, touched: set[str], *, snapshot_due: bool = False) -> None:
    """:meth:`_sync` for a store with no slot yet (a rebuild, a start without a snapshot): every
    visible memory gets a slot in the fold's order, with the same columns, hashes, keyword rows
    and vectors as :meth:`_sync` would give it, made in bulk. The keyword index is filled by a
    thread (SQLite works without the GIL) while this one makes the columns and vectors."""
    state = store.state
    store.changed.update(touched)
    slot_ids: list[str] = []
    slot_hashes = store.slot_hashes
    records: list[MemoryRecord] = []
    to_embed: list[EmbedItem] = []
    try:
        blake2b = hashlib.blake2b
        for memory_id, record in state.memories.items():
            if not record.exists or ((record.deleted_stamp or record.expired_stamp) and record.status != "live"):
                continue
            slot = len(slot_ids)
            slot_ids.append(memory_id)
            records.append(record)
            text = embed_text(record)
            # content_hash(text), then content_hash(text + "\x00" + summary) from the same state
            hasher = blake2b(text.encode("utf-8"), digest_size=HASH_BYTES)
            text_hash = hasher.digest()
            hasher.update(b"\x00" + record.summary.encode("utf-8"))
            slot_hashes.append(hasher.digest())
            to_embed.append((slot, text, text_hash))
        store.table.extend(slot_ids)
        batch = Batch(tuple(map(functools.partial(projected, store), records)), ())
        store.keywords.load(batch)  # (a large one from a thread, while this one goes on)
        store.columns.load(batch)
        store.vectors.embed(to_embed)  # (what its load would embed, hashed above in the same pass)
        if snapshot_due and store.keywords.loading and not store.embedding.busy:
            try:
                store._encoded_state = (state, len(state.seen), msgspec.msgpack.encode(state))
            except OverflowError:  # (no snapshot then: see save_snapshot)
                store._encoded_state = None
    finally:
        store.keywords.settle()


def is_superseded(store: Store, memory_id: str) -> bool:
    return any(
        link.relation == "supersedes" and link.target == memory_id and store.state.visible(link.source)
        for link in store.state.links_of(memory_id)
    )
