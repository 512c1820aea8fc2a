"""Summarizers: a short summary of a memory, for result lists and session-start bundles.

The caller's own summary always wins (the agent is a model itself). The offline default,
:class:`ExtractiveSummarizer`, keeps the sentences that carry the text's most frequent content
words (Luhn's method), in their original order, within a character budget.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Protocol, runtime_checkable

from eventmem.core.words import STOPWORDS, tokens

__all__ = ["ExtractiveSummarizer", "Summarizer"]


@runtime_checkable
class Summarizer(Protocol):
    @property
    def model_id(self) -> str: ...

    def summarize(self, texts: list[str]) -> list[str]: ...


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])|\n{2,}|\n(?=\s*[-*•]|\s*\d+[.)])")


class ExtractiveSummarizer:
    def __init__(self, max_chars: int = 240) -> None:
        self.max_chars = max_chars

    @property
    def model_id(self) -> str:
        return f"extractive-v1-{self.max_chars}"

    def summarize(self, texts: list[str]) -> list[str]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> str:
        flat = " ".join(text.split())
        if len(flat) <= self.max_chars:
            return flat
        sentences = [" ".join(s.split()) for s in _SENTENCE.split(text) if s and s.strip()]
        if len(sentences) <= 1:
            return _clip(flat, self.max_chars)
        # (sentences are cut at white space only, so their words are the text's words)
        words_of = [tokens(sentence) for sentence in sentences]
        freq = Counter(w for words in words_of for w in words if w not in STOPWORDS and len(w) > 2)
        scored = []
        for index, sentence_words in enumerate(words_of):
            words = [w for w in sentence_words if w in freq]
            score = sum(freq[w] for w in words) / (len(words) ** 0.5 or 1.0)
            scored.append((score + (0.5 if index == 0 else 0.0) * max(freq.values(), default=1), index))
        chosen: list[int] = []
        used = 0
        for _, index in sorted(scored, reverse=True):
            length = len(sentences[index]) + (1 if chosen else 0)
            if used + length <= self.max_chars:
                chosen.append(index)
                used += length
        if not chosen:
            return _clip(sentences[0], self.max_chars)
        return " ".join(sentences[i] for i in sorted(chosen))


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"
