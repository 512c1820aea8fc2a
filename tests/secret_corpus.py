"""The corpus of secret shapes and look-alikes in ``tests/fixtures/secrets/``, expanded.

The files hold no secret-shaped text: ``⟨N:ALPHABET⟩`` stands for N characters drawn with a fixed
seed, so the fake secrets are the same on every run and never sit in the repository whole.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "secrets"
ALPHABETS = {
    "alnum": string.ascii_letters + string.digits,
    "alpha": string.ascii_letters,
    "hex": "0123456789abcdef",
    "upper": string.ascii_uppercase + string.digits,
    "digits": string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
}
RUN = re.compile(r"⟨(\d+):(\w+)⟩")
MARKED = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)


@dataclass(frozen=True)
class Secret:
    kind: str
    """The kind of ``[REDACTED:<kind>]`` expected, or ``private`` for a dropped span."""
    line: str
    """The whole line, the secret in it."""
    secret: str
    """The part that must vanish."""


def _expand(text: str, rng: random.Random) -> str:
    text = text.replace("\\n", "\n")
    return RUN.sub(lambda m: "".join(rng.choice(ALPHABETS[m.group(2)]) for _ in range(int(m.group(1)))), text)


def _lines(name: str) -> list[str]:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def secrets() -> list[Secret]:
    out = []
    for number, row in enumerate(_lines("secrets.txt")):
        kind, _, line = row.partition("\t")
        line = _expand(line, random.Random(f"secret {number}"))
        (secret,) = MARKED.findall(line)
        out.append(Secret(kind, MARKED.sub(lambda m: m.group(1), line), secret))
    return out


def lookalikes() -> list[str]:
    return [
        _expand(line, random.Random(f"look-alike {number}")) for number, line in enumerate(_lines("lookalikes.txt"))
    ]
