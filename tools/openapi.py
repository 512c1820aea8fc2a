"""Write the REST API's OpenAPI 3.1 document to schema/openapi.json, or check it is current.

python tools/openapi.py          # regenerate from the REST models (eventmem.adapters.http.schemas)
python tools/openapi.py --check  # exit 1 when the committed file differs from the code
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eventmem.adapters.http.openapi import openapi_document

DOCUMENT_PATH = Path(__file__).resolve().parent.parent / "schema" / "openapi.json"


def render() -> str:
    """The document file's exact text."""
    return json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None, path: Path = DOCUMENT_PATH) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the file differs from the code")
    args = parser.parse_args(argv)
    expected = render()
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != expected:
            state = "is missing" if current is None else "differs from the REST models"
            print(f"{path.name} {state}; run `python tools/openapi.py` and commit the result", file=sys.stderr)
            return 1
        print(f"{path.name} is current")
        return 0
    path.write_text(expected, encoding="utf-8")
    print(f"wrote {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
