"""Summaries by the client's model (MCP sampling): used only when enabled, offered and needed; any
failure falls back to the extractive summary and the save goes through."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_client import call
from mcp_client import connect as connect_client

from eventmem.core.summarizer import ExtractiveSummarizer

pytestmark = pytest.mark.anyio

LONG = (
    "We moved invoice PDF rendering off the billing queue. Slow renders of large invoices delayed card "
    "charges at month end, so render_invoice_pdf now runs on a dedicated pdf queue served by its own "
    "worker service with more memory. The billing queue carries only money-moving tasks: charges, "
    "allocations and refunds. Exports and imports stay off it too."
)
MODEL_SUMMARY = "PDF rendering moved to its own pdf queue so slow renders never delay billing tasks."


class FakeModel:
    def __init__(self, *, refuse: bool = False) -> None:
        self.requests: list[mcp_types.CreateMessageRequestParams] = []
        self.refuse = refuse

    async def __call__(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.ErrorData:
        self.requests.append(params)
        if self.refuse:
            return mcp_types.ErrorData(code=-1, message="the user declined the sampling request")
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=f'"{MODEL_SUMMARY}"'),
            model="fake-model",
        )


def configure(project: Path, summarizer: str) -> None:
    config = project / ".eventmem" / "config.local.toml"  # sampling is the user's choice, never the repo's
    config.parent.mkdir(exist_ok=True)
    config.write_text(f'summarizer = "{summarizer}"\n')


def connect(project: Path, model: FakeModel | None, mode: str = "legacy") -> AbstractAsyncContextManager[Client]:
    """A client whose model answers sampling requests (no model: the client offers no sampling)."""
    options: dict[str, Any] = {"sampling_callback": model} if model is not None else {}
    return connect_client(project, mode=mode, **options)


def extractive(text: str) -> str:
    return ExtractiveSummarizer().summarize([text])[0]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_with_sampling_enabled_the_clients_model_writes_the_summary(project: Path, mode: str) -> None:
    configure(project, "sampling")
    model = FakeModel()
    async with connect(project, model, mode) as client:
        out = await call(client, "save_context", context_text=LONG)
        stored = await call(client, "store_memory", content=LONG + " Second copy.", type="decision")
    assert out["summary"] == MODEL_SUMMARY
    assert stored["memory"]["summary"] == MODEL_SUMMARY
    assert len(model.requests) == 2
    request = model.requests[0]
    assert isinstance(request.messages[0].content, mcp_types.TextContent)
    assert "render_invoice_pdf" in request.messages[0].content.text
    assert request.system_prompt and request.max_tokens <= 200


async def test_the_sampling_argument_is_not_part_of_the_tools_input_schema(project: Path) -> None:
    async with connect(project, None) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("save_context", "store_memory"):
        assert "sampled" not in tools[name].input_schema["properties"]


async def test_the_callers_own_summary_wins_and_the_model_is_not_asked(project: Path) -> None:
    configure(project, "sampling")
    model = FakeModel()
    async with connect(project, model) as client:
        out = await call(client, "save_context", context_text=LONG, summary="Caller's summary.")
    assert out["summary"] == "Caller's summary."
    assert model.requests == []


async def test_a_short_text_is_its_own_summary_and_the_model_is_not_asked(project: Path) -> None:
    configure(project, "sampling")
    model = FakeModel()
    async with connect(project, model) as client:
        out = await call(client, "save_context", context_text="Use ruff format.")
    assert out["summary"] == "Use ruff format."
    assert model.requests == []


async def test_sampling_is_off_by_default(project: Path) -> None:
    model = FakeModel()
    async with connect(project, model) as client:
        out = await call(client, "save_context", context_text=LONG)
    assert out["summary"] == extractive(LONG)
    assert model.requests == []


async def test_a_client_without_sampling_gets_the_extractive_summary(project: Path) -> None:
    configure(project, "sampling")
    async with connect(project, None) as client:
        out = await call(client, "save_context", context_text=LONG)
    assert out["summary"] == extractive(LONG)


async def test_a_refused_sampling_request_falls_back_and_the_save_goes_through(project: Path) -> None:
    configure(project, "sampling")
    model = FakeModel(refuse=True)
    async with connect(project, model) as client:
        out = await call(client, "save_context", context_text=LONG)
        found = await call(client, "get_memory", memory_id=out["id"])
    assert len(model.requests) == 1
    assert out["summary"] == extractive(LONG)
    assert found["memory"]["content"] == LONG
