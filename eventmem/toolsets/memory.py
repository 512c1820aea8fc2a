"""The team-memory family: typed, tagged, scoped memories with importance and TTL."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from eventmem.mcp_app import (
    ADDITIVE,
    CHANGING,
    DESTRUCTIVE,
    KIND_HELP,
    READ_ONLY,
    App,
    app_of,
    call,
    client_name,
    dump,
    make_filters,
)

__all__ = ["register"]


def register(server: MCPServer[App]) -> None:
    # -- the team-memory family ----------------------------------------------------------------

    @server.tool(
        title="Store memory",
        description=(
            "Store a typed memory: a decision, fix, error, solution, problem, code_pattern, workflow, "
            "convention or general note, with tags and an importance from 0 to 1. Give ttl_seconds for "
            "something that should fade (it is promoted to long-term if it proves useful). scope "
            "'global' stores it in your user-wide memory, shared across projects."
        ),
        annotations=ADDITIVE,
    )
    def store_memory(
        ctx: Context[App, Any],
        content: Annotated[str, Field(description="The memory itself, complete enough to act on later.")],
        type: Annotated[str, Field(description=KIND_HELP)] = "general",
        title: Annotated[str, Field(description="A short title; optional.")] = "",
        summary: Annotated[str | None, Field(description="One or two sentences; optional.")] = None,
        tags: Annotated[list[str] | None, Field(description="A few lower-case tags.")] = None,
        importance: Annotated[float, Field(description="0 (trivia) to 1 (critical).")] = 0.5,
        ttl_seconds: Annotated[int | None, Field(description="Seconds until it expires; omit for long-term.")] = None,
        scope: Annotated[str, Field(description="'project' (default) or 'global'.")] = "project",
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        memory = call(
            lambda: service.save(
                content,
                title=title,
                summary=summary,
                tags=tags,
                kind=type,
                importance=importance,
                ttl_seconds=ttl_seconds,
                scope=scope,
                by=client_name(ctx),
            )
        )
        return {"status": "success", "memory": dump(memory)}

    @server.tool(
        title="Recall memories",
        description=(
            "Semantic + keyword recall with filters applied before ranking: type (one or several), "
            "tags (all must match), scope ('project', 'global' or 'all'), min_importance, "
            "created_after/created_before. Expired and superseded memories are never returned."
        ),
        annotations=READ_ONLY,
    )
    def recall_memories(
        ctx: Context[App, Any],
        query: Annotated[str, Field(description="What you want to know.")],
        limit: Annotated[int, Field(description="How many results, 1 to 100.")] = 5,
        type: Annotated[str | list[str] | None, Field(description="Only these types.")] = None,
        tags: Annotated[str | list[str] | None, Field(description="Only memories with all these tags.")] = None,
        scope: Annotated[str | None, Field(description="'project', 'global' or 'all' (default).")] = None,
        min_importance: Annotated[float | None, Field(description="Only memories at least this important.")] = None,
        include_content: Annotated[bool, Field(description="Return each memory's full content.")] = True,
        created_after: Annotated[str | None, Field(description="Created at or after this ISO-8601 time.")] = None,
        created_before: Annotated[str | None, Field(description="Created before this ISO-8601 time.")] = None,
    ) -> dict[str, Any]:
        service = app_of(ctx).service

        def run() -> dict[str, Any]:
            filters = make_filters(type, tags, scope, min_importance, created_after, created_before)
            hits = service.recall(query, limit=limit, filters=filters, include_content=include_content)
            return {"status": "success", "results": dump(hits)}

        out = call(run)
        if warnings := service.warnings():
            out["warnings"] = warnings
        return out

    @server.tool(
        title="Get memory",
        description="Fetch one memory by id, with its full content, times and status.",
        annotations=READ_ONLY,
    )
    def get_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, Field(description="The memory's id.")],
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        return {"status": "success", "memory": dump(call(lambda: service.get(memory_id)))}

    @server.tool(
        title="Update memory",
        description=(
            "Change fields of a memory; fields you leave out stay as they are. A new content is "
            "re-summarized and re-embedded. ttl_seconds 0 makes it long-term. The history is kept."
        ),
        annotations=CHANGING,
    )
    def update_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, Field(description="The memory's id.")],
        content: str | None = None,
        title: str | None = None,
        summary: str | None = None,
        tags: list[str] | None = None,
        type: Annotated[str | None, Field(description=KIND_HELP)] = None,
        importance: float | None = None,
        ttl_seconds: Annotated[int | None, Field(description="New TTL in seconds; 0 = long-term.")] = None,
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        ttl: int | str | None = "unchanged" if ttl_seconds is None else (None if ttl_seconds == 0 else ttl_seconds)
        memory = call(
            lambda: service.update(
                memory_id,
                content=content,
                title=title,
                summary=summary,
                tags=tags,
                kind=type,
                importance=importance,
                ttl_seconds=ttl,  # type: ignore[arg-type]
                by=client_name(ctx),
            )
        )
        return {"status": "success", "memory": dump(memory)}

    @server.tool(
        title="Delete memory",
        description=(
            "Delete a memory that is wrong or no longer useful. It stops being returned; its history "
            "stays in the journal and it can be restored."
        ),
        annotations=DESTRUCTIVE,
    )
    def delete_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, Field(description="The memory's id.")],
        reason: Annotated[str, Field(description="Why; kept in the history.")] = "",
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        memory = call(lambda: service.delete(memory_id, reason=reason, by=client_name(ctx)))
        return {"status": "success", "id": memory.id, "deleted": True}
