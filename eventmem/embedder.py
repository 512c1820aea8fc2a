"""Embedders turn text into unit vectors. The built-in one needs no model and no network.

An :class:`Embedder` has a ``model_id`` that keys the embedding cache (a change of model re-embeds
everything), a ``dim``, and ``embed`` for a batch. The default, :class:`HashingEmbedder`, hashes
word, word-pair and character n-gram features into a fixed-size vector (the "hashing trick"):
deterministic, offline, a few thousand texts a second, and better than keywords alone at
morphology and identifiers (``retrieveContext`` ~ ``retrieve_context`` ~ "retrieve the context").
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections import Counter
from typing import Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "HashingEmbedder", "Loadable", "tokens"]

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> Vectors:
        """One L2-normalised float32 row per text."""
        ...


@runtime_checkable
class Loadable(Protocol):
    """An embedder whose model takes a while to get ready (a model file, a server to reach).

    The store calls :meth:`load` in the background and answers with keyword search until it
    returns; ``embed`` on an embedder that is not loaded loads it first.
    """

    @property
    def loaded(self) -> bool: ...

    def load(self) -> None: ...


STOPWORDS: Final = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves""".split()
)

_TOKEN = re.compile(r"[^\W_](?:[\w.\-/]*[^\W_])?")
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_a-zA-Z]+")
_SUFFIXES: Final = ("ing", "ed", "es", "s", "ly")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; identifiers and paths also yield their parts.

    ``src/retrieveContext.py`` gives ``src/retrievecontext.py``, ``src``, ``retrieve``,
    ``context``, ``py``.
    """
    out: list[str] = []
    for raw in _TOKEN.findall(text):
        parts = _PARTS.findall(raw)
        whole = raw.lower()
        if len(parts) > 1:
            out.append(whole)
            out.extend(p.lower() for p in parts)
        else:
            out.append(whole)
    return out


class HashingEmbedder:
    """Feature-hashed words, word pairs and character n-grams, L2-normalised (numpy only)."""

    def __init__(self, dim: int = 384) -> None:
        self._dim = dim

    @property
    def model_id(self) -> str:
        return f"hashing-v1-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def features(self, text: str) -> Counter[str]:
        words = [_stem(w) for w in tokens(text) if w not in STOPWORDS]
        feats: Counter[str] = Counter()
        for word in words:
            feats["w:" + word] += 2
            marked = f"<{word}>"
            if len(word) > 3:
                for n in (3, 4):
                    for i in range(len(marked) - n + 1):
                        feats[marked[i : i + n]] += 1
        for first, second in itertools.pairwise(words):
            feats[f"b:{first} {second}"] += 1
        return feats

    def embed(self, texts: list[str]) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        dim = self._dim
        for row, text in enumerate(texts):
            feats = self.features(text)
            if not feats:
                continue
            hashes = np.fromiter((zlib.crc32(f.encode()) for f in feats), dtype=np.uint32, count=len(feats))
            weights = np.log1p(np.fromiter(feats.values(), dtype=np.float32, count=len(feats)))
            # word features weigh more than the many n-grams of the same word
            kinds = np.fromiter((f[1] == ":" for f in feats), dtype=bool, count=len(feats))
            weights = np.where(kinds, weights * 2.0, weights * 0.5).astype(np.float32)
            signs = np.where(hashes & 0x80000000, -1.0, 1.0).astype(np.float32)
            np.add.at(out[row], (hashes % dim).astype(np.intp), weights * signs)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out
