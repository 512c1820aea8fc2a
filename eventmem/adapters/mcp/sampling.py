"""Summaries by the client's own model (MCP sampling), optional and never required.

Order of preference for a memory's summary: the caller's own (the agent is a model itself), then
(with ``summarizer = "sampling"`` in the config, a client that declares the ``sampling`` capability,
and a text too long to be its own summary) one written by the client's model, else the extractive
summary. Sampling is deprecated in the newest protocol revision (2026-07-28), many clients do not
offer it, and a user may refuse a request: so every path falls back to the extractive summary.

The save tools take the result through a resolver parameter (``Annotated[..., Resolve(...)]``, the
SDK 2.x form). The resolver decides whether to ask at all. On a 2026-07-28 connection it returns a
:class:`Sample` request, which the SDK turns into an ``input_required`` round trip (the only way to
sample there); on a handshake-era connection it sends the same ``sampling/createMessage`` request
itself, so that a refusal, an error or a slow answer falls back instead of failing the save.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import anyio
import mcp.types as mcp_types
from mcp.server.mcpserver import Context, Sample
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import is_version_at_least

from eventmem.adapters.mcp.app import app_of
from eventmem.core.redact import scrub
from eventmem.core.summarizer import ExtractiveSummarizer

__all__ = ["SYSTEM_PROMPT", "content_summary", "context_text_summary", "summary_text"]

log = logging.getLogger("eventmem.adapters.mcp.sampling")

INPUT_REQUIRED_VERSION: Final = "2026-07-28"
TIMEOUT_SECONDS: Final = 30.0
MAX_TOKENS: Final = 120
MAX_SUMMARY_CHARS: Final = 300
MAX_PROMPT_CHARS: Final = 12000

SYSTEM_PROMPT: Final = (
    "You write one- or two-sentence summaries of notes a software team keeps about its project. "
    "Keep identifiers, file names, error messages and numbers exactly as written. Answer with the "
    "summary only, no preamble."
)

SampledSummary = mcp_types.CreateMessageResult | str | None
"""What a save tool receives: the client's answer (input_required path), a summary the resolver
already got (handshake path), or ``None`` (not asked, or it failed: use the extractive summary)."""


def summary_text(sampled: SampledSummary) -> str | None:
    """The summary in a sampled answer, cleaned up; ``None`` when there is none."""
    if isinstance(sampled, mcp_types.CreateMessageResult):
        content = sampled.content
        text = content.text if isinstance(content, mcp_types.TextContent) else ""
    else:
        text = sampled or ""
    text = " ".join(text.split()).strip().strip('"').strip()
    if not text:
        return None
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 1].rsplit(" ", 1)[0].rstrip(" ,;:") + "…"
    return text


async def content_summary(ctx: Context[Any, Any], content: str, summary: str | None) -> Sample | str | None:
    """Resolver for ``store_memory`` (its text argument is ``content``)."""
    return await _summarize(ctx, content, summary)


async def context_text_summary(ctx: Context[Any, Any], context_text: str, summary: str | None) -> Sample | str | None:
    """Resolver for ``save_context`` (its text argument is ``context_text``)."""
    return await _summarize(ctx, context_text, summary)


def _wanted(ctx: Context[Any, Any], text: str, summary: str | None) -> bool:
    if summary is not None and summary.strip():
        return False
    if not isinstance(text, str) or len(" ".join(text.split())) <= ExtractiveSummarizer().max_chars:
        return False  # short enough to be its own summary
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.sampling is not None


async def _summarize(ctx: Context[Any, Any], text: str, summary: str | None) -> Sample | str | None:
    app = app_of(ctx)
    if not _wanted(ctx, text, summary):
        return None
    service = app.service_ if app.service_ is not None else await anyio.to_thread.run_sync(lambda: app.service)
    if service.config.summarizer != "sampling":
        return None
    try:
        clean = scrub(text, refuse=False, field="content")[:MAX_PROMPT_CHARS]
    except Exception:
        return None
    message = mcp_types.SamplingMessage(
        role="user", content=mcp_types.TextContent(type="text", text=f"Summarize this project note:\n\n{clean}")
    )
    request = Sample([message], max_tokens=MAX_TOKENS, system_prompt=SYSTEM_PROMPT, temperature=0.2)
    version = ctx.protocol_version
    if version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION):
        return request
    try:
        with anyio.fail_after(TIMEOUT_SECONDS):
            result = await ctx.session.send_request(
                mcp_types.CreateMessageRequest(params=request.params),
                mcp_types.CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
    except Exception as exc:  # refused, failed, timed out, or no back-channel: extractive it is
        log.info("sampling a summary failed (%s); using the extractive summary", exc)
        return None
    return summary_text(result)
