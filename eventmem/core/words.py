"""Words as eventmem reads them: the stop words and the word tokens (identifiers and paths also yield
their parts), shared by the built-in embedder, the keyword side of a search and the summarizer."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

__all__ = ["STOPWORDS", "TOKEN_PATTERN", "raw_token_words", "stem", "tokens"]


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
TOKEN_PATTERN: Final = _TOKEN
"""What a raw token is (a word, an identifier, a path), before :func:`tokens` splits it into parts."""
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+|[^\W\d_a-zA-Z]+")
_SUFFIXES: Final = ("ing", "ed", "es", "s", "ly")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    if not word.endswith(_SUFFIXES):  # (most words: one call instead of one per suffix)
        return word
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; identifiers and paths also yield their parts.

    ``src/retrieveContext.py`` gives ``src/retrievecontext.py``, ``src``, ``retrieve``,
    ``context``, ``py``.
    """
    return [token for raw in _TOKEN.findall(text) for token in _word_tokens(raw)]


def raw_token_words(raw: str) -> tuple[str, ...]:
    """:func:`tokens` of one raw token (a whole match of :data:`TOKEN_PATTERN`), without the search."""
    return _word_tokens(raw)


@lru_cache(maxsize=65536)
def _word_tokens(raw: str) -> tuple[str, ...]:
    """One raw token's lower-cased form, then its parts if it has several."""
    parts = _PARTS.findall(raw)
    whole = raw.lower()
    if len(parts) > 1:
        return (whole, *(p.lower() for p in parts))
    return (whole,)
