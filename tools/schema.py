"""Write the JSON Schema of a journal line to schema/events.schema.json, or check it is current.

python tools/schema.py          # regenerate from the event Structs
python tools/schema.py --check  # exit 1 when the committed file differs from the code
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eventmem.core.codec import event_schema

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schema" / "events.schema.json"


def render() -> str:
    """The schema file's exact text."""
    return json.dumps(event_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None, path: Path = SCHEMA_PATH) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the file differs from the code")
    args = parser.parse_args(argv)
    expected = render()
    if args.check:
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        if current != expected:
            state = "is missing" if current is None else "differs from the event Structs"
            print(f"{path.name} {state}; run `python tools/schema.py` and commit the result", file=sys.stderr)
            return 1
        print(f"{path.name} is current")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(expected, encoding="utf-8")
    print(f"wrote {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
