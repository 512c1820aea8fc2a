"""Keyword ranking from in-memory postings: the scores of FTS5's ``bm25()``, without its cost per row.

FTS5 ranks a query by calling ``bm25()`` on every row that matches: the row's positions are decoded
and its size read from a b-tree, about 1.4 us a row (1.1 ms for a word held by 800 of 100k
memories, on the benchmark machine). Here each token keeps the slots holding it with its weighted
frequency (the column weights of the keyword index), and a query is scored with numpy: the same
arithmetic as FTS5's ``fts5Bm25Function`` (``k1`` 1.2, ``b`` 0.75, IDF clamped at 1e-6, the phrases
added in query order), so the scores are FTS5's own, bit for bit, and the ranking (score, then slot)
is the keyword index's.

Tokens are FTS5's (:mod:`eventmem.projectors.tokens`). A query word that is more than one token (an
identifier such as ``parse_config`` is the phrase ``parse config``) is scored by FTS5 alone, and its
scores added in its place: a phrase's part of ``bm25()`` depends on that phrase only.

A posting carries the version of its slot: a memory changed or removed bumps the version, which
voids its old postings where they lie; a token's postings are compacted when next read. The
postings are made by a thread after a start (about 5 s of one core at 100k memories on the
benchmark machine, FTS5 ranking meanwhile) and kept in the keyword index's snapshot, so that the
next start reads them instead (12 bytes a posting: 68 MB at 100k synthetic notes).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec
import numpy as np
import numpy.typing as npt

from eventmem.projectors.base import AFTER_CALL_SECONDS
from eventmem.projectors.tokens import Tokens

__all__ = ["DEFAULT_POSTINGS_FROM", "WEIGHTS", "BackgroundPostings", "PhraseScoresKept", "Postings", "StoredPostings"]

DEFAULT_POSTINGS_FROM: Final = 1_000
"""Rows from which the keyword index ranks from postings (``Tuning.postings_from``). At 1k memories
FTS5's ``bm25()`` already costs about 0.2 ms a search; the postings (about 0.7 KB a memory, made in
a background thread in tens of ms) took ``retrieve_context`` over stdio from 2.16-2.20x the no-op
to 2.01-2.07x at 1k and from 2.58x to 2.33-2.40x at 10k (``tools/bench.py``, A/B on copies of one
project). Below it a search costs little either way."""
WEIGHTS: Final = (4.0, 2.0, 1.0, 3.0)
"""Column weights (title, summary, content, tags), as the keyword index ranks with them."""
log = logging.getLogger("eventmem.projectors")

CHUNK: Final = 2000
"""Rows tokenized at a time while postings are made."""
ADD_IN_THREAD_FROM: Final = 500
"""Rows added at once (a merged branch) from which the postings are brought up to date by a thread
while FTS5 ranks, instead of within the call (about 0.2 ms a row of one core)."""

K1: Final = 1.2
B: Final = 0.75
_ENTRY = np.dtype([("slot", np.int32), ("version", np.int32), ("freq", np.float32)])
"""12 bytes a posting; a frequency is a sum of small whole weights, exact in float32."""
_BASE_ENTRY = np.dtype([("slot", np.int32), ("freq", np.float32)])
"""8 bytes a posting read back from a snapshot: their version is 0, so it is not held."""
_SMALL_BASE_ENTRY = np.dtype([("slot", np.int32), ("freq", np.uint16)])
"""6 bytes a posting read back, when every frequency is a whole number below 65,536 (the weights are
whole: any text short of tens of thousands of one word's occurrences): the same values, as exact."""


def _base_entry(freqs: npt.NDArray[np.float32]) -> np.dtype[np.void]:
    """The narrowest of :data:`_SMALL_BASE_ENTRY` and :data:`_BASE_ENTRY` that holds ``freqs`` exactly."""
    if not len(freqs):
        return _SMALL_BASE_ENTRY
    whole = freqs.min() >= 0 and freqs.max() <= np.iinfo(np.uint16).max and np.array_equal(freqs, np.floor(freqs))
    return _SMALL_BASE_ENTRY if whole else _BASE_ENTRY


Row = tuple[int, str, str, str, str]
"""(slot, title, summary, content, tags)"""
PhraseScores = Callable[[str], tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]]
"""A query word's own part of ``bm25()`` for every row holding it, from FTS5: (slots, scores)."""


class StoredPostings(msgspec.Struct, frozen=True):
    """Postings as kept in the keyword index's snapshot: arrays as little-endian bytes."""

    stems: str
    """Every numbered stem, in number order, one a line (a token holds no white space)."""
    entries: bytes
    """The postings as 12-byte records (int32 slot, int32 version 0, float32 weighted frequency),
    grouped by stem number, each group in slot order: read as they lie, without a copy."""
    counts: bytes
    """int64 postings of each stem number."""
    live: bytes
    """int32 slots that have a row, increasing."""
    sizes: bytes
    """int32 tokens in each of those rows."""
    known: str = ""
    """ASCII tokens whose stems were asked of FTS5, one a line (a query of them need not ask again)."""
    known_stems: bytes = b""
    """int32 stem number of each of those tokens."""


class Postings:
    """Per token, the slots holding it with their weighted frequency; per slot its size in tokens."""

    def __init__(self, tokens: Tokens) -> None:
        self.tokens = tokens
        self._base = np.zeros(0, _BASE_ENTRY)
        """The postings read back from a snapshot (:meth:`from_stored`), all of version 0, grouped by
        stem number, each group in slot order: one array, no object a stem."""
        self._base_at = np.zeros(1, np.int64)
        """Where each stem number's group starts in :attr:`_base` (and, last, its length)."""
        self._base_left = np.zeros(0, bool)
        """Per stem number of the base, whether its group was moved into :attr:`_lists` (its postings
        compacted there once a row holding it changed)."""
        self._lists: dict[int, list[npt.NDArray[np.void]]] = {}
        """Per stem number, its postings made or compacted since: one array in slot order, and those
        added since."""
        self._version = np.zeros(0, np.int32)
        self._live = np.zeros(0, bool)
        self._sizes = np.zeros(0, np.float64)
        self.rows = 0
        self.total_tokens = 0
        self._removals = 0
        """Rows removed or replaced so far: a token's postings checked since then hold no void one."""
        self._checked: dict[int, int] = {}
        """Per stem number, :attr:`_removals` when its postings were last found all live."""

    def __len__(self) -> int:
        return self.rows

    def stored(self) -> StoredPostings:
        """Every live posting, compacted, in a form to keep beside the index (see :meth:`from_stored`)."""
        stems, known, known_stems = self.tokens.numbered_stems()
        numbers = sorted({*self._lists, *np.flatnonzero(np.diff(self._base_at)).tolist()})
        parts = [(number, found) for number in numbers if (found := self._holders(number)) is not None]
        counts = np.zeros(len(stems), np.int64)
        for number, found in parts:
            counts[number] = len(found)
        entries = np.zeros(int(counts.sum()), _ENTRY)  # (the versions start over with the postings read back)
        if parts:
            slots = np.concatenate([found["slot"] for _, found in parts])
            entries["slot"], entries["freq"] = slots, np.concatenate([found["freq"] for _, found in parts])
        return StoredPostings(
            stems="\n".join(stems),
            entries=entries.tobytes(),
            counts=counts.tobytes(),
            live=np.flatnonzero(self._live).astype(np.int32).tobytes(),
            sizes=self._sizes[self._live].astype(np.int32).tobytes(),
            known="\n".join(known),
            known_stems=np.asarray(known_stems, np.int32).tobytes(),
        )

    @classmethod
    def from_stored(cls, stored: StoredPostings) -> Postings:
        """The postings :meth:`stored` kept; :class:`ValueError` if they do not hold together."""
        stems = stored.stems.split("\n") if stored.stems else []
        known = stored.known.split("\n") if stored.known else []
        postings = cls(Tokens.numbering(stems, known, np.frombuffer(stored.known_stems, np.int32).tolist()))
        counts = np.frombuffer(stored.counts, np.int64)
        entries = np.frombuffer(stored.entries, _ENTRY)
        slots = entries["slot"]
        live = np.frombuffer(stored.live, np.int32)
        sizes = np.frombuffer(stored.sizes, np.int32)
        if (
            len(counts) != len(stems)
            or (counts < 0).any()
            or int(counts.sum()) != len(slots)
            or (entries["version"] != 0).any()
            or len(sizes) != len(live)
            or (len(live) and (live.min() < 0 or (np.diff(live) <= 0).any()))
            or (sizes < 0).any()
        ):
            raise ValueError("the stored keyword postings do not hold together")
        top = int(live[-1]) if len(live) else -1
        postings._grow(top)
        postings._live[live] = True
        postings._sizes[live] = sizes
        group = np.repeat(np.arange(len(counts)), counts)
        if len(slots) and (
            slots.min() < 0
            or slots.max() > top
            or not postings._live[slots].all()
            or ((np.diff(slots) <= 0) & (np.diff(group) == 0)).any()
        ):
            raise ValueError("a stored keyword posting is of no row, or out of order")
        postings._base = np.empty(len(entries), _base_entry(entries["freq"]))  # (a copy: the stored bytes go)
        postings._base["slot"], postings._base["freq"] = slots, entries["freq"]
        postings._base_at = np.concatenate(([0], np.cumsum(counts)))
        postings._base_left = np.zeros(len(counts), bool)
        postings.rows = len(live)
        postings.total_tokens = int(sizes.sum())
        return postings

    def frozen(self) -> Postings:
        """A copy that later changes of these postings leave as it is (the arrays of postings are
        shared: they are never changed in place), to encode in another thread (see :meth:`encoded`)."""
        copy = Postings(self.tokens)
        copy._base, copy._base_at, copy._base_left = self._base, self._base_at, self._base_left.copy()
        copy._lists = {number: list(parts) for number, parts in self._lists.items()}
        copy._version, copy._live, copy._sizes = self._version.copy(), self._live.copy(), self._sizes.copy()
        copy.rows, copy.total_tokens = self.rows, self.total_tokens
        copy._removals, copy._checked = self._removals, dict(self._checked)
        return copy

    def encoded(self) -> bytes:
        """:meth:`stored`, encoded (see :meth:`decoded`)."""
        return msgspec.msgpack.encode(self.stored())

    @classmethod
    def decoded(cls, blob: bytes, rows: int) -> Postings:
        """The postings :meth:`encoded` kept, of ``rows`` rows; :class:`ValueError` if damaged or not of them."""
        try:
            stored = msgspec.msgpack.decode(blob, type=StoredPostings)
        except msgspec.DecodeError as exc:
            raise ValueError(f"the stored keyword postings do not decode: {exc}") from exc
        postings = cls.from_stored(stored)
        if len(postings) != rows:
            raise ValueError("the stored keyword postings are of other rows")
        return postings

    def entries(self) -> int:
        """Postings held (live or void, until compacted)."""
        sizes = np.diff(self._base_at)
        in_base = int(sizes[~self._base_left].sum()) if len(sizes) else 0
        return in_base + sum(len(part) for parts in self._lists.values() for part in parts)

    def _grow(self, top: int) -> None:
        if top >= len(self._live):
            size = max(top + 1, len(self._live) * 2, 1024)
            self._version = np.concatenate([self._version, np.zeros(size - len(self._version), np.int32)])
            self._live = np.concatenate([self._live, np.zeros(size - len(self._live), bool)])
            self._sizes = np.concatenate([self._sizes, np.zeros(size - len(self._sizes), np.float64)])

    def remove(self, slots: Iterable[int]) -> None:
        """Forget these slots' rows (their postings are void from now on)."""
        for slot in slots:
            if 0 <= slot < len(self._live) and self._live[slot]:
                self._live[slot] = False
                self._version[slot] += 1
                self._removals += 1
                self.rows -= 1
                self.total_tokens -= int(self._sizes[slot])

    def add(self, rows: Sequence[Row]) -> None:
        """Index these rows (a slot already present is replaced)."""
        if not rows:
            return
        self.remove(r[0] for r in rows)
        self._grow(max(r[0] for r in rows))
        columns = self.tokens.numbered([text for row in rows for text in row[1:]])
        terms: list[int] = []
        slots: list[int] = []
        freqs: list[int] = []
        title_weight, summary_weight, _, tags_weight = (int(w) for w in WEIGHTS)  # (the content's is 1)
        for i, row in enumerate(rows):
            slot = row[0]
            title, summary, content, tags = columns[i * 4 : i * 4 + 4]
            found = Counter(content)
            for weight, tokens in ((title_weight, title), (summary_weight, summary), (tags_weight, tags)):
                for token in tokens:
                    found[token] += weight
            size = len(title) + len(summary) + len(content) + len(tags)
            terms.extend(found)
            slots.extend([slot] * len(found))
            freqs.extend(found.values())
            self._live[slot] = True
            self._sizes[slot] = size
            self.rows += 1
            self.total_tokens += size
        numbers = np.asarray(terms, np.int64)
        order = np.argsort(numbers, kind="stable")  # (slot order within a term)
        entries = np.empty(len(terms), _ENTRY)
        entries["slot"] = np.asarray(slots, np.int32)[order]
        entries["version"] = self._version[entries["slot"]]
        entries["freq"] = np.asarray(freqs, np.float32)[order]
        numbers = numbers[order]
        firsts = np.flatnonzero(np.concatenate(([True], numbers[1:] != numbers[:-1])))
        for number, part in zip(numbers[firsts].tolist(), np.split(entries, firsts[1:]), strict=True):
            self._lists.setdefault(number, []).append(part)

    def _holders(self, token: int) -> npt.NDArray[np.void] | None:
        """The live postings of ``token``, in slot order (with fields ``slot`` and ``freq``): its group of
        the base, as it lies while every row holding it is unchanged; else compacted with those added
        since into one array of :attr:`_lists` (as a side effect)."""
        parts = self._lists.get(token)
        base = None
        if 0 <= token < len(self._base_left) and not self._base_left[token]:
            start, end = self._base_at[token], self._base_at[token + 1]
            base = self._base[start:end] if end > start else None
        if base is not None:
            if not parts:
                if self._checked.get(token) == self._removals:
                    return base  # (nothing was removed since they were found live)
                if (self._live[base["slot"]] & (self._version[base["slot"]] == 0)).all():
                    self._checked[token] = self._removals
                    return base
            moved = np.zeros(len(base), _ENTRY)  # (of version 0, as the base's)
            moved["slot"], moved["freq"] = base["slot"], base["freq"]
            parts = [moved, *(parts or [])]
            self._base_left[token] = True
        if not parts:
            return None
        if len(parts) == 1 and self._checked.get(token) == self._removals and base is None:
            return parts[0]  # (nothing was removed since they were found live)
        entries = parts[0] if len(parts) == 1 else np.concatenate(parts)
        valid = self._live[entries["slot"]] & (self._version[entries["slot"]] == entries["version"])
        if len(parts) > 1 or base is not None or not valid.all():
            entries = entries[valid]
            entries = entries[np.argsort(entries["slot"], kind="stable")]
            if len(entries):
                self._lists[token] = [entries]
            else:
                self._lists.pop(token, None)
                return None
        self._checked[token] = self._removals
        return entries

    def holds(self, word: str) -> bool | None:
        """Whether a row holds ``word`` (FTS5's ``MATCH '"word"'``), for a word of one token; ``None``
        for a word of several tokens (a phrase) or of none: FTS5 answers those."""
        tokens = self.tokens.numbered([word], new=False)[0]
        if len(tokens) != 1:
            return None
        return self._holders(tokens[0]) is not None

    def search(
        self,
        words: Sequence[str],
        k: int,
        allowed: npt.NDArray[np.bool_] | None,
        phrase_scores: PhraseScores,
    ) -> list[tuple[int, float]] | None:
        """Top ``k`` (slot, score) among ``allowed`` for the phrases ``words`` (``"w1" OR "w2" ...``),
        best first, ties by slot; ``None`` if a word is no token at all (FTS5 answers such a query)."""
        if self.rows == 0:
            return []
        tokenized = self.tokens.numbered(words, new=False)
        if any(not tokens for tokens in tokenized):
            return None
        avgdl = self.total_tokens / self.rows
        parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = []
        for word, tokens in zip(words, tokenized, strict=True):
            if len(tokens) > 1:
                parts.append(phrase_scores(word))
                continue
            entries = self._holders(tokens[0])
            if entries is None:
                continue
            slots = entries["slot"].astype(np.int64)
            freq = entries["freq"].astype(np.float64)
            hits = len(slots)
            idf = math.log((self.rows - hits + 0.5) / (hits + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            size = self._sizes[slots]
            parts.append((slots, idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * size / avgdl)))))
        parts = [p for p in parts if len(p[0])]
        if not parts:
            return []
        if len(parts) == 1:
            union, totals = parts[0]  # (in slot order, each once)
        else:  # each row's parts summed from 0 in query order, as FTS5 adds the phrases
            union, inverse = np.unique(np.concatenate([slots for slots, _ in parts]), return_inverse=True)
            scores = np.concatenate([scores for _, scores in parts])
            totals = np.bincount(inverse, scores, len(union)).astype(np.float64, copy=False)
        if allowed is not None:
            keep = union < len(allowed)
            keep[keep] = allowed[union[keep]]
            union, totals = union[keep], totals[keep]
        if len(union) > k:
            cut = np.partition(totals, len(totals) - k)[len(totals) - k]
            near = totals >= cut
            union, totals = union[near], totals[near]
        order = np.lexsort((union, -totals))[:k]
        return list(zip(union[order].tolist(), totals[order].tolist(), strict=True))


class PhraseScoresKept:
    """Phrase scores as :data:`PhraseScores` gave them, kept until :meth:`clear` (any change to the
    rows), at most :data:`MAX_PHRASE_ROWS_KEPT` rows in all."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        self._rows = 0

    def get(self, word: str, score: PhraseScores) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """``score(word)``, or what it gave since the last :meth:`clear` (read-only arrays)."""
        found = self._kept.get(word)
        if found is None:
            found = score(word)
            for array in found:
                array.flags.writeable = False  # (shared by later searches)
            if self._rows + len(found[0]) > MAX_PHRASE_ROWS_KEPT:
                self.clear()
            if len(found[0]) <= MAX_PHRASE_ROWS_KEPT:
                self._kept[word] = found
                self._rows += len(found[0])
        return found

    def clear(self) -> None:
        self._kept = {}
        self._rows = 0


MAX_PHRASE_ROWS_KEPT: Final = 1_000_000
"""Rows of the phrase scores kept between changes (16 bytes each), all phrases together."""


class BackgroundPostings:
    """:class:`Postings` made by a thread (from a dump of the rows, or from a snapshot's stored form)
    while FTS5 answers, then kept current.

    Every method is called under the store's lock (writes, and the reads that may install the
    postings), so the changes made while the thread works are logged and replayed, in order, on the
    postings it made before they answer. If the thread fails (stored postings that do not hold
    together, no memory left), FTS5 goes on ranking alone: the same answers, at its cost."""

    def __init__(self, make: Callable[[threading.Event], Postings], how: str) -> None:
        """``make``: called by the thread with the event :meth:`stop` sets (it may give up when set);
        ``how`` says in the log where the postings came from."""
        self._log: list[tuple[list[Row], list[int]]] = []
        """Changes since the rows ``make`` reads, in order: (rows added, slots removed)."""
        self._made: Postings | None = None
        self._active: Postings | None = None
        self._failed = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._make, args=(make, how), name="eventmem-postings", daemon=True)
        self._thread.start()

    @classmethod
    def of_rows(cls, rows: Callable[[], list[Row]], count: int) -> BackgroundPostings:
        """Postings made from ``rows`` (called by the thread: every row, in slot order, as they are
        now), which are ``count`` (else none are made: FTS5 ranks alone)."""

        def make(stopping: threading.Event) -> Postings:
            found = rows()
            if len(found) != count:
                raise ValueError(f"{len(found)} rows were read for the {count} of the keyword index")
            postings = Postings(Tokens())
            for start in range(0, len(found), CHUNK):
                if stopping.is_set():
                    raise _Stopped
                postings.add(found[start : start + CHUNK])
            return postings

        return cls(make, "made")

    @classmethod
    def of_stored(cls, stored: bytes, rows: int) -> BackgroundPostings:
        """Postings decoded (and checked) from a snapshot's ``stored`` form, of ``rows`` rows."""
        return cls(lambda _stopping: Postings.decoded(stored, rows), "read from the snapshot")

    def _make(self, make: Callable[[threading.Event], Postings], how: str) -> None:
        started = time.perf_counter()
        try:
            postings = make(self._stopping)
        except _Stopped:
            self._failed = True
            log.debug("keyword postings not %s: stopped", how)
            return
        except Exception as exc:  # (damaged, or out of memory: FTS5 goes on ranking alone)
            self._failed = True
            log.warning("keyword postings not %s (%s); FTS5 ranks every search", how, exc)
            return
        self._made = postings
        log.info("keyword postings of %d memories %s in %.2f s", len(postings), how, time.perf_counter() - started)

    def added(self, rows: list[Row]) -> None:
        if self._active is not None and len(rows) >= ADD_IN_THREAD_FROM:
            self._add_in_thread(self._active, list(rows))
        elif self._active is not None:
            self._active.add(rows)
        elif not self._failed:
            self._log.append((list(rows), []))

    def _add_in_thread(self, postings: Postings, rows: list[Row]) -> None:
        """Hand a large batch of rows (a merged branch) to a thread: FTS5 ranks until the postings
        are current again, as after a start (the same scores; the changes made meanwhile are logged
        and replayed by :meth:`ready`). The thread alone touches ``postings`` until it is done."""

        def make(stopping: threading.Event) -> Postings:
            if stopping.wait(AFTER_CALL_SECONDS):  # (the call that made the change answered first)
                raise _Stopped
            for start in range(0, len(rows), CHUNK):
                if stopping.is_set():
                    raise _Stopped
                postings.add(rows[start : start + CHUNK])
            return postings

        self._active, self._made, self._log = None, None, []
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._make, args=(make, "updated"), name="eventmem-postings", daemon=True
        )
        self._thread.start()

    def removed(self, slots: list[int]) -> None:
        if self._active is not None:
            self._active.remove(slots)
        elif not self._failed:
            self._log.append(([], list(slots)))

    def ready(self) -> Postings | None:
        """The postings, current, once the thread made them (else ``None``: FTS5 answers)."""
        if self._active is None and (made := self._made) is not None:
            for rows, slots in self._log:
                made.remove(slots)
                made.add(rows)
            self._log = []
            self._active = made
        return self._active

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread; whether it is done."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Have the thread give up at its next chunk of rows and wait for it (at most ``timeout``
        seconds): a process must not exit while it runs (its tokenizer's connection is closed at
        exit). Whether it is done. Postings already made stay usable."""
        self._stopping.set()
        return self.wait(timeout)


class _Stopped(Exception):
    """:meth:`BackgroundPostings.stop` was asked while the postings were being made."""
