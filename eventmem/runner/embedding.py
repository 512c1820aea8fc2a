"""The embedding queue: texts in, vectors out to the vector projector, now or from a worker thread.

A model-backed embedder (ONNX, Ollama, an OpenAI-compatible endpoint) may take seconds to load and
minutes to embed a whole journal. In the background mode (a server) the fold and the keyword index
are made at once, cached vectors are used at once, and the rest is embedded by one worker thread
that holds the runner's lock only to take a batch and to put the vectors in; until it is done,
:meth:`EmbeddingQueue.status` is not "ready" and recall answers from the keyword index alone. The
runner writes no snapshot while anything is pending, so a snapshot never lacks a vector. The
built-in embedder embeds within the call, but in a server that is open, a backlog larger than
:data:`BUILTIN_INLINE_EMBED_MAX` (a branch merged under it) goes to the worker in the same way; such
a backlog is handed on whole, and the worker looks each batch up in the embedding cache itself
(without the lock), so that the call that folded the merge does not.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from eventmem.embedders.embedcache import EmbeddingCache, QueryVectors, recorded_model
from eventmem.embedders.embedder import Embedder, HashingEmbedder, Loadable
from eventmem.embedders.providers import ProviderError
from eventmem.projectors.base import AFTER_CALL_SECONDS
from eventmem.projectors.vectors import EmbedItem

__all__ = [
    "BUILTIN_INLINE_EMBED_MAX",
    "BUILTIN_WORKER_BATCH",
    "EMBED_BATCH",
    "INLINE_EMBED_MAX",
    "RETRY_UNAVAILABLE_SECONDS",
    "EmbeddingQueue",
    "Progress",
]

log = logging.getLogger("eventmem.runner")

EMBED_BATCH = 256
INLINE_EMBED_MAX = 16
"""With a model-backed embedder in the background mode, at most this many new texts are embedded
inside a call (a save reads its own vector at once); a larger backlog goes to the worker."""
BUILTIN_WORKER_BATCH = 2048
"""The texts the worker takes at once with the built-in embedder (a model's worker takes
:data:`EMBED_BATCH`): fewer turns of the lock and of the vector index's bookkeeping, the same vectors
(a text's vector does not depend on its batch); 8% sooner done at 100k than batches of 256."""
BUILTIN_INLINE_EMBED_MAX = 256
"""The same for the built-in embedder (about 0.1 ms a text) in a server once it is open: a larger
backlog (a merged branch) goes to the worker, and recall answers from the keyword index meanwhile."""
RETRY_UNAVAILABLE_SECONDS = 30.0
Progress = Callable[[int, int], None]

Put = Callable[[npt.NDArray[np.int64], npt.NDArray[np.float32]], None]


class EmbeddingQueue:
    """Embeds texts for slots and hands the vectors to ``put``.

    ``wanted(slot)``: whether a slot still wants the vector the worker made for it (its memory may
    have gone meanwhile). ``on_done``: called (without the lock) when the worker emptied a backlog."""

    def __init__(
        self,
        lock: threading.RLock,
        embedder: Embedder,
        cache: EmbeddingCache,
        put: Put,
        wanted: Callable[[int], bool],
        on_done: Callable[[], None],
    ) -> None:
        self.lock = lock
        self.embedder = embedder
        self.cache = cache
        self.query_vectors = QueryVectors()
        """The last queries' vectors (a model's pass over a query costs milliseconds)."""
        self._put = put
        self._wanted = wanted
        self._on_done = on_done
        self.background = False
        """Embed in the worker (see :meth:`start`); guarded by the lock."""
        self.backlog_to_worker = False
        """The built-in embedder leaves a backlog larger than :data:`BUILTIN_INLINE_EMBED_MAX` to the
        worker too (a server, once open: see :meth:`Store.open`); guarded by the lock."""
        self.progress: Progress | None = None
        """Called with (embedded, to embed) as a large batch of texts is embedded."""
        self._ready = not isinstance(embedder, Loadable) or embedder.loaded
        self._batch = BUILTIN_WORKER_BATCH if isinstance(embedder, HashingEmbedder) else EMBED_BATCH
        self._replacing = False
        """The project's vectors are another model's (a new version of the built-in embedder): in the
        background mode a large backlog goes to the worker, as a model's does (see :meth:`start`)."""
        self._pending: dict[int, tuple[str, bytes]] = {}
        """Slot -> (text, content hash) waiting for the worker."""
        self._inflight = 0
        self._generation = 0
        self._error: str | None = None
        self._error_at = 0.0
        self._worker: threading.Thread | None = None
        self._last_worker: threading.Thread | None = None
        self._stop = threading.Event()
        self._done = threading.Condition(lock)
        self._not_before = 0.0
        """The worker takes no batch before this moment (``time.monotonic``): see :meth:`submit`."""

    # -- state ------------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Texts wait for the worker or are being embedded by it."""
        return bool(self._pending or self._inflight)

    @property
    def failing(self) -> bool:
        """The embedder failed and was not tried again since."""
        return self._error is not None

    def forget(self, slots: list[int]) -> None:
        """Those slots no longer want a vector (their memories went)."""
        for slot in slots:
            self._pending.pop(slot, None)

    def forget_all(self) -> None:
        """Nothing pending any more; what the worker has in flight is for slots that are gone."""
        self._pending = {}
        self._generation += 1

    def status(self) -> str:
        """``ready``, ``loading`` (the model), ``embedding`` (a backlog) or ``unavailable``."""
        with self.lock:
            if self._error is not None and self.background:
                self._ensure_worker()  # tries again once RETRY_UNAVAILABLE_SECONDS have passed
            if self._error is not None:
                return "unavailable"
            if not self._ready and self.background:
                return "loading"  # (in the foreground mode the first embed loads the model)
            if self._pending or self._inflight:
                return "embedding"
            return "ready"

    def note(self, status: str) -> str:
        """A status in words, for a result that had to do without vectors."""
        with self.lock:
            model = self.embedder.model_id
            if status == "unavailable":
                return f"semantic search is unavailable ({self._error}); these are keyword matches only"
            if status == "loading":
                return f"the embedding model {model} is still loading; these are keyword matches only"
            if status == "embedding":
                left = len(self._pending) + self._inflight
                return f"{left} memories are still being embedded with {model}; these are keyword matches only"
            return ""

    def wait(self, timeout: float | None = None) -> None:
        """Wait until the worker is done (or has failed)."""
        with self._done:
            self._done.wait_for(lambda: self._worker is None, timeout)

    def start(self) -> None:
        """Switch to background embedding and start loading the model (returns at once)."""
        with self.lock:
            self.background = True
            self._replacing = recorded_model(self.cache.path.parent) not in ("", self.embedder.model_id)
            if not self._ready:
                self._ensure_worker()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the worker after its current batch (what it embedded stays cached).

        Not to be called with the lock held (the worker needs it to finish its batch)."""
        self._stop.set()
        with self.lock:
            worker = self._last_worker  # (may still be finishing after it marked itself done)
        if worker is not None:
            worker.join(timeout)

    # -- embedding --------------------------------------------------------------------------------

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        cached = self.query_vectors.get(text)
        if cached is not None:
            return cached
        try:
            vector: npt.NDArray[np.float32] = self.embedder.embed([text])[0]
        except ProviderError as exc:
            with self.lock:
                self._failed(exc)
            raise
        self.query_vectors.put(text, vector)
        return vector

    def submit(self, items: list[EmbedItem]) -> None:
        """Embed these texts now, or leave them to the worker (caller holds the lock)."""
        slow = isinstance(self.embedder, Loadable) or self._replacing
        if not self.background or (not slow and (not self.backlog_to_worker or len(items) <= BUILTIN_INLINE_EMBED_MAX)):
            self._embed_inline(items)
            return
        if self._ready and self.backlog_to_worker and len(items) > BUILTIN_INLINE_EMBED_MAX:
            # a backlog (a merged branch): the worker looks its texts up in the cache too, batch by
            # batch, after the call (about 30 us a text at 100k memories)
            for slot, text, digest in items:
                self._pending[slot] = (text, digest)
            self._not_before = time.monotonic() + AFTER_CALL_SECONDS
            self._ensure_worker()
            return
        vectors, missing = self.cache.lookup([h for _, _, h in items])
        if missing:
            self.cache.refresh()
            vectors, missing = self.cache.lookup([h for _, _, h in items])
        absent = set(missing)
        cached = [i for i in range(len(items)) if i not in absent]
        for i in cached:
            self._pending.pop(items[i][0], None)
        backlog = self._pending or self._inflight or self._error is not None
        inline = (
            self._ready and not backlog and len(missing) <= (INLINE_EMBED_MAX if slow else BUILTIN_INLINE_EMBED_MAX)
        )
        if not inline:  # (first: the vectors put below are then known to be part of a backlog)
            for i in missing:
                slot, text, digest = items[i]
                self._pending[slot] = (text, digest)
        if cached:
            self._put(np.asarray([items[i][0] for i in cached], np.int64), vectors[cached])
        if not missing:
            return
        if inline:
            self._embed_inline([items[i] for i in missing])
            return
        self._ensure_worker()

    def _embed_inline(self, items: list[EmbedItem]) -> None:
        try:
            self._embed_into_index(items)
        except ProviderError as exc:
            # the event is in the journal already: keep it findable by keywords, embed it later
            self._failed(exc)
            for slot, text, digest in items:
                self._pending[slot] = (text, digest)

    def _embed_into_index(self, items: list[EmbedItem]) -> None:
        hashes = [h for _, _, h in items]
        vectors, missing = self.cache.lookup(hashes)
        # Another process may have embedded these already: read what it appended to the cache.
        # For a save or two with the built-in embedder, embedding again is cheaper than reading.
        if missing and (len(missing) > 8 or not isinstance(self.embedder, HashingEmbedder)):
            self.cache.refresh()
            vectors, missing = self.cache.lookup(hashes)
        for start in range(0, len(missing), EMBED_BATCH):
            batch = missing[start : start + EMBED_BATCH]
            fresh = self._embed_unique([items[i][1] for i in batch], [hashes[i] for i in batch])
            vectors[batch] = fresh
            self.cache.store([hashes[i] for i in batch], fresh)
            if self.progress is not None and len(missing) > EMBED_BATCH:
                self.progress(start + len(batch), len(missing))
        self._put(np.asarray([slot for slot, _, _ in items], np.int64), vectors)

    def _embed_unique(self, texts: list[str], digests: list[bytes]) -> npt.NDArray[np.float32]:
        """Vectors for ``texts``, embedding each distinct text (by content hash) once."""
        first: dict[bytes, int] = {}
        for position, digest in enumerate(digests):
            first.setdefault(digest, position)
        if len(first) == len(digests):
            return self.embedder.embed(texts)
        unique = list(first)
        fresh = self.embedder.embed([texts[first[d]] for d in unique])
        row = {digest: i for i, digest in enumerate(unique)}
        return fresh[[row[d] for d in digests]]

    def _vectors_of(self, batch: list[tuple[int, tuple[str, bytes]]]) -> tuple[npt.NDArray[np.float32], list[int]]:
        """The vectors of a batch the worker took, and the positions it embedded (the others were in
        the cache). The cache is read without the lock (its index only grows under it, each record
        once written), so that the call that handed the batch on is not kept waiting; the records
        other processes appended are indexed under it."""
        digests = [digest for _, (_, digest) in batch]
        vectors, missing = self.cache.lookup(digests)
        if missing:
            with self.lock:
                self.cache.refresh()
            found, still = self.cache.lookup([digests[i] for i in missing])
            vectors[missing] = found
            missing = [missing[i] for i in still]
        if missing:
            vectors[missing] = self._embed_unique([batch[i][1][0] for i in missing], [digests[i] for i in missing])
        return vectors, missing

    def _failed(self, exc: BaseException) -> None:
        log.warning("embedder %s failed: %s", self.embedder.model_id, exc)
        self._error = str(exc)
        self._error_at = time.monotonic()

    # -- the worker -------------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is not None or self._stop.is_set():
            return
        if self._error is not None:
            if time.monotonic() - self._error_at < RETRY_UNAVAILABLE_SECONDS:
                return
            self._error = None
        worker = threading.Thread(target=self._work, name="eventmem-vectors", daemon=True)
        self._worker = self._last_worker = worker
        worker.start()

    def _work(self) -> None:
        done = 0
        try:
            if not self._ready:
                assert isinstance(self.embedder, Loadable)
                self.embedder.load()
                with self.lock:
                    self._ready = True
            while True:
                if (wait := self._not_before - time.monotonic()) > 0:
                    self._stop.wait(wait)  # (the call that handed a backlog on answered first)
                with self.lock:
                    if self._stop.is_set() or not self._pending:
                        # decided under the lock: a backlog added after this starts a new worker
                        self._worker = None
                        finished = done > 0 and not self._pending and not self._stop.is_set()
                        if finished:  # (said before the waiters go on: what they start is logged after it)
                            log.info("embedded %d memories with %s: every vector is in", done, self.embedder.model_id)
                        self._done.notify_all()
                        self._replacing = self._replacing and not finished
                        break
                    generation = self._generation
                    batch = list(itertools.islice(self._pending.items(), self._batch))
                    for slot, _ in batch:
                        del self._pending[slot]
                    self._inflight = len(batch)
                    total = done + len(batch) + len(self._pending)
                try:
                    vectors, embedded = self._vectors_of(batch)
                except BaseException:
                    with self.lock:
                        self._inflight = 0
                        if generation == self._generation:
                            for slot, item in batch:
                                self._pending.setdefault(slot, item)
                    raise
                with self.lock:
                    self._inflight = 0
                    if embedded:
                        self.cache.store([batch[i][1][1] for i in embedded], vectors[embedded])
                    if generation != self._generation:
                        continue
                    keep = [i for i, (slot, _) in enumerate(batch) if self._wanted(slot) and slot not in self._pending]
                    if keep:
                        self._put(np.asarray([batch[i][0] for i in keep], np.int64), vectors[keep])
                    done += len(batch)
                    if self.progress is not None:
                        self.progress(done, total)
                    if done % (EMBED_BATCH * 8) < len(batch):
                        log.info("embedded %d of %d memories with %s", done, total, self.embedder.model_id)
        except Exception as exc:
            with self.lock:
                self._failed(exc)
                self._worker = None
                self._done.notify_all()
            return
        if finished:
            self._on_done()
