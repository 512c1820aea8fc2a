"""Keep secrets out of the journal: it is committed to git and read in pull requests.

``<private>…</private>`` spans are always dropped. Common secret shapes (cloud keys, tokens,
private keys, passwords in URLs and assignments) are replaced by ``[REDACTED:<kind>]``, or, with
``secrets = "refuse"`` in the config, the write is refused with a message naming what was found.
"""

from __future__ import annotations

import functools
import re
from typing import Final

from eventmem.errors import SecretRefused

__all__ = ["find_secrets", "scrub"]

PRIVATE: Final = re.compile(r"<private>.*?(?:</private>|\Z)", re.DOTALL | re.IGNORECASE)

PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b")),
    (
        "aws-secret-key",
        re.compile(r"(?i)(aws_?secret_?(?:access_?)?key\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{40})\b"),
    ),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}\b")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}\b")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("stripe-key", re.compile(r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}\b")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\b")),
    ("url-password", re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]+:)([^\s@/]+)(@)")),
    (
        "password",
        re.compile(
            # also DB_PASSWORD= and "password": ...; a value that is code (a call, an index) is kept
            r"(?i)(?<![a-z0-9])((?:password|passwd|pwd|secret|api_?key|access_?token|auth_?token)[\"']?\s*[:=]\s*[\"']?)"
            r"([^\s\"'()\[\]{},;]{6,}+)(?![(\[])"
        ),
    ),
)


NEEDLES: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "private-key": (("PRIVATE KEY",),),
    "aws-access-key": (("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),),
    "aws-secret-key": (("aws",), ("secret",)),
    "github-token": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),),
    "gitlab-token": (("glpat-",),),
    "slack-token": (("xox",),),
    "anthropic-key": (("sk-ant-",),),
    "openai-key": (("sk-",),),
    "google-api-key": (("AIza",),),
    "stripe-key": (("k_live_", "k_test_"),),
    "jwt": (("eyJ",),),
    "url-password": (("://",),),
    "password": (
        (
            "password",
            "passwd",
            "pwd",
            "secret",
            "apikey",
            "api_key",
            "accesstoken",
            "access_token",
            "authtoken",
            "auth_token",
        ),
    ),
}
"""What each pattern cannot match without: every group must have a string in the text (lower-cased
for the patterns that ignore case). For ASCII text, a pattern whose needles are missing is not run:
most texts hold none of them, and one ``in`` costs far less than a regular expression's scan."""
_IGNORING_CASE: Final = frozenset({"aws-secret-key", "url-password", "password"})


def _may_match(kind: str, text: str, lower: str) -> bool:
    haystack = lower if kind in _IGNORING_CASE else text
    return all(any(needle in haystack for needle in group) for group in NEEDLES[kind])


def _found(text: str) -> list[str]:
    if not text.isascii():  # (case folding beyond ASCII can match a needle's letters otherwise)
        return [kind for kind, pattern in PATTERNS if pattern.search(text)]
    lower = text.lower()
    return [kind for kind, pattern in PATTERNS if _may_match(kind, text, lower) and pattern.search(text)]


def _without_private(text: str) -> str:
    if text.isascii() and "<private" not in text.lower():
        return text
    return PRIVATE.sub("", text)


def find_secrets(text: str) -> list[str]:
    """Kinds of secrets found in ``text`` (after private spans are dropped)."""
    return _found(_without_private(text))


def _replace(kind: str, match: re.Match[str]) -> str:
    if kind in {"url-password"}:
        return f"{match.group(1)}[REDACTED:{kind}]{match.group(3)}"
    if kind in {"password", "aws-secret-key"}:
        return f"{match.group(1)}[REDACTED:{kind}]"
    return f"[REDACTED:{kind}]"


def scrub(text: str, *, refuse: bool = False, field: str = "text") -> str:
    """``text`` without private spans and secrets; raises :class:`SecretRefused` if ``refuse``."""
    text = _without_private(text)
    found = _found(text)
    if not found:
        return text
    if refuse:
        raise SecretRefused(
            f"the {field} looks like it holds a secret ({', '.join(found)}); the journal is committed "
            "to git, so remove it (or wrap it in <private>…</private> to drop it) and save again"
        )
    for kind, pattern in PATTERNS:
        text = pattern.sub(functools.partial(_replace, kind), text)
    return text
