"""The benchmarks' output: one JSON object on standard output, and in the file ``--out`` names."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def emit(result: dict[str, Any], out: str | Path | None) -> None:
    """Print ``result`` as indented JSON (the progress goes to standard error), and write it to ``out``."""
    text = json.dumps(result, indent=2) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()
    if out:
        Path(out).write_text(text, encoding="utf-8")
