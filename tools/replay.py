#!/usr/bin/env python3
"""``eventmem replay`` from a checkout: the same commands (``eventmem/adapters/replay.py``), runnable with or
without eventmem installed.

    python tools/replay.py rebuild | audit | at WHEN [MEMORY] | log MEMORY | diff [OLD] [NEW]
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import eventmem  # noqa: F401
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventmem.adapters.replay import main

if __name__ == "__main__":
    sys.exit(main())
