"""Make the modules only an optional extra brings unimportable, as on a bare install.

Put this folder on ``PYTHONPATH`` with ``EVENTMEM_BLOCKED_MODULES`` (top-level module names,
comma-separated) and ``EVENTMEM_BLOCKED_LOG`` (a file): every import of a blocked module (or of
one of its submodules) fails with ``ModuleNotFoundError`` as if it were not installed, and is
written to the log (``import NAME by FILE``, then the stack that asked for it). A probe
(``importlib.util.find_spec``, which is how eventmem asks whether an extra is installed) answers
``None`` as on a bare install, and is not logged.
Used by ``tests/test_bare_install.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

_BLOCKED = frozenset(n for n in os.environ.get("EVENTMEM_BLOCKED_MODULES", "").split(",") if n)
_LOG = os.environ.get("EVENTMEM_BLOCKED_LOG", "")


class _Blocker:
    """A meta path finder placed first: it refuses the blocked modules before any other finder looks."""

    @staticmethod
    def find_spec(name: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name.partition(".")[0] not in _BLOCKED:
            return None
        if _LOG:
            stack = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith("<frozen")]
            importer = stack[-1].filename if stack else "?"
            shown = "".join(traceback.format_list(stack[-12:]))
            with open(_LOG, "a", encoding="utf-8") as log:
                log.write(f"import {name} by {importer} (pid {os.getpid()})\n{shown}\n")
        raise ModuleNotFoundError(f"No module named {name!r} (blocked: a bare install lacks it)", name=name)


_find_spec = importlib.util.find_spec


def _probe(name: str, package: str | None = None) -> ModuleSpec | None:
    if name.partition(".")[0] in _BLOCKED:
        return None
    return _find_spec(name, package)


if _BLOCKED:
    sys.meta_path.insert(0, _Blocker())  # type: ignore[arg-type]
    importlib.util.find_spec = _probe
