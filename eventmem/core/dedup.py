"""Dedup keys: two memories whose contents normalise to the same text are the same memory for dedup."""

from __future__ import annotations

import hashlib
import string

__all__ = ["dedup_key", "normalize_text"]

_EDGE_PUNCTUATION = string.punctuation + string.whitespace


def normalize_text(text: str) -> str:
    """Case-folded, whitespace collapsed, punctuation stripped at both ends."""
    return " ".join(text.casefold().split()).strip(_EDGE_PUNCTUATION)


def dedup_key(text: str) -> bytes:
    """Two texts with the same key are the same memory for dedup."""
    return hashlib.blake2b(normalize_text(text).encode("utf-8"), digest_size=16).digest()
