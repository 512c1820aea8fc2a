"""The team-memory family: typed, tagged, scoped memories with importance and TTL."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Resolve
from pydantic import Field

from eventmem.adapters.mcp.app import (
    ADDITIVE,
    CHANGING,
    DESTRUCTIVE,
    KIND_HELP,
    READ_ONLY,
    App,
    MetadataMap,
    TagText,
    app_of,
    as_list,
    bounded,
    call,
    client_name,
    dump,
    make_filters,
)
from eventmem.adapters.mcp.sampling import SampledSummary, content_summary, summary_text
from eventmem.adapters.mcp.toolsets.interchange import register as register_interchange

__all__ = ["register", "section_note"]


def section_note(section: str, memory_id: str) -> dict[str, Any]:
    """What a save of a singleton type answers besides the memory: the section it wrote instead."""
    return {
        "section": section,
        "message": (
            f"this type is the project-context section {section}: its one memory ({memory_id}) was updated, "
            "no second one was made"
        ),
    }


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
        sampled: Annotated[SampledSummary, Resolve(content_summary)],
        content: Annotated[str, bounded("content", "The memory itself, complete enough to act on later.")],
        type: Annotated[str, Field(description=KIND_HELP)] = "general",
        title: Annotated[str, bounded("title", "A short title; optional.")] = "",
        summary: Annotated[str | None, bounded("summary", "One or two sentences; optional.")] = None,
        tags: Annotated[list[TagText] | None, bounded("tags", "A few lower-case tags.")] = None,
        importance: Annotated[float, bounded("importance", "0 (trivia) to 1 (critical).")] = 0.5,
        ttl_seconds: Annotated[
            int | None, bounded("ttl_seconds", "Seconds until it expires; omit for long-term.")
        ] = None,
        scope: Annotated[str, Field(description="'project' (default) or 'global'.")] = "project",
        metadata: Annotated[
            MetadataMap | None, bounded("metadata", "Facts with no field of their own (name to text); optional.")
        ] = None,
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        summary = summary or summary_text(sampled)  # the caller's, else the client model's (if enabled)
        saved = call(
            lambda: service.save_result(
                content,
                title=title,
                summary=summary,
                tags=tags,
                kind=type,
                importance=importance,
                ttl_seconds=ttl_seconds,
                scope=scope,
                by=client_name(ctx),
                metadata=metadata,
            )
        )
        out: dict[str, Any] = {"status": "success", "memory": dump(saved.memory)}
        if saved.deduplicated:
            out["deduplicated"] = True
        if saved.section:
            out |= section_note(saved.section, saved.memory.id)
        return out

    @server.tool(
        title="Recall memories",
        description=(
            "Semantic + keyword recall with filters applied before ranking: type (one or several), "
            "tags (all must match), scope ('project', 'global' or 'all'), min_importance, "
            "created_after/created_before, project (a project's name; '*' for every project a shared "
            "store holds). Expired memories are never returned; superseded ones only with include_superseded."
        ),
        annotations=READ_ONLY,
    )
    def recall_memories(
        ctx: Context[App, Any],
        query: Annotated[str, bounded("query", "What you want to know.")],
        limit: Annotated[int, bounded("limit", "How many results, 1 to 100.")] = 5,
        type: Annotated[str | list[str] | None, Field(description="Only these types.")] = None,
        tags: Annotated[str | list[str] | None, Field(description="Only memories with all these tags.")] = None,
        scope: Annotated[str | None, Field(description="'project', 'global' or 'all' (default).")] = None,
        min_importance: Annotated[float | None, bounded("importance", "Only memories at least this important.")] = None,
        include_content: Annotated[bool, Field(description="Return each memory's full content.")] = True,
        created_after: Annotated[str | None, bounded("time", "Created at or after this ISO-8601 time.")] = None,
        created_before: Annotated[str | None, bounded("time", "Created before this ISO-8601 time.")] = None,
        include_superseded: Annotated[bool, Field(description="Also return memories replaced by others.")] = False,
        project: Annotated[
            str | None, bounded("project", "Only memories of this project (by name); '*': of every project.")
        ] = None,
    ) -> dict[str, Any]:
        service = app_of(ctx).service

        def run() -> dict[str, Any]:
            filters = make_filters(type, tags, scope, min_importance, created_after, created_before, include_superseded)
            hits = service.recall(
                query, limit=limit, filters=filters, include_content=include_content, access=True, project=project
            )
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
        memory_id: Annotated[str, bounded("memory_id", "The memory's id.")],
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        return {"status": "success", "memory": dump(call(lambda: service.get(memory_id, access=True)))}

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
        memory_id: Annotated[str, bounded("memory_id", "The memory's id.")],
        content: Annotated[str | None, bounded("content", "The new content.")] = None,
        title: Annotated[str | None, bounded("title", "The new title.")] = None,
        summary: Annotated[str | None, bounded("summary", "The new summary.")] = None,
        tags: Annotated[list[TagText] | None, bounded("tags", "The new tags.")] = None,
        type: Annotated[str | None, Field(description=KIND_HELP)] = None,
        importance: Annotated[float | None, bounded("importance", "0 (trivia) to 1 (critical).")] = None,
        ttl_seconds: Annotated[int | None, bounded("ttl_seconds", "New TTL in seconds; 0 = long-term.", low=0)] = None,
        metadata: Annotated[MetadataMap | None, bounded("metadata", "The new metadata (replaces all of it).")] = None,
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
                metadata=metadata,
            )
        )
        return {"status": "success", "memory": dump(memory)}

    @server.tool(
        title="Delete memory",
        description=(
            "Delete a memory that is wrong or no longer useful. It stops being returned; its history "
            "stays in the journal and it can be restored (restore_memory, or `eventmem restore <id>`)."
        ),
        annotations=DESTRUCTIVE,
    )
    def delete_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, bounded("memory_id", "The memory's id.")],
        reason: Annotated[str, bounded("reason", "Why; kept in the history.")] = "",
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        memory = call(lambda: service.delete(memory_id, reason=reason, by=client_name(ctx)))
        return {"status": "success", "id": memory.id, "deleted": True}

    @server.tool(
        title="Restore memory",
        description=(
            "Bring back a deleted or expired memory: it is returned again, with its history. A memory whose "
            "TTL had run out gets a fresh one (promote_memory makes it long-term); the links its delete "
            "removed come back. Restoring a live memory changes nothing."
        ),
        annotations=CHANGING,
    )
    def restore_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, Field(description="The memory's id.")],
        reason: Annotated[str, Field(description="Why; kept in the history.")] = "",
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        memory, restored = call(lambda: service.restore(memory_id, reason=reason, by=client_name(ctx)))
        out: dict[str, Any] = {"status": "success", "memory": dump(memory), "restored": restored}
        if not restored:
            out["message"] = f"memory {memory.id} is live: nothing to restore"
        return out

    # -- lifecycle: search, relationships, context, promotion, supersede --------------------------

    @server.tool(
        title="Search memories",
        description=(
            "Structured search. Filters: type (one or several), tags (all must match), min_importance / "
            "max_importance, scope ('project', 'global' or 'all'), project (this project's name, or the "
            "project a global memory was saved from), created_after/before and updated_after/before "
            "(ISO-8601). With a query: keyword + vector ranking (mode 'hybrid', 'keyword' or 'vector'). "
            "Without one: a listing of what the filters match, most important first (sort 'recent' for "
            "newest first). Expired memories are never returned; superseded ones only on request."
        ),
        annotations=READ_ONLY,
    )
    def search_memories(
        ctx: Context[App, Any],
        query: Annotated[str | None, bounded("query", "Optional text; omit to list by filters.")] = None,
        type: Annotated[str | list[str] | None, Field(description="Only these types.")] = None,
        tags: Annotated[str | list[str] | None, Field(description="Only memories with all these tags.")] = None,
        min_importance: Annotated[float | None, bounded("importance", "At least this important.")] = None,
        max_importance: Annotated[float | None, bounded("importance", "At most this important.")] = None,
        scope: Annotated[str | None, Field(description="'project', 'global' or 'all' (default).")] = None,
        project: Annotated[str | None, bounded("project", "Only memories of this project (by name).")] = None,
        created_after: Annotated[str | None, bounded("time", "Created at or after (ISO-8601).")] = None,
        created_before: Annotated[str | None, bounded("time", "Created before (ISO-8601).")] = None,
        updated_after: Annotated[str | None, bounded("time", "Last changed at or after (ISO-8601).")] = None,
        updated_before: Annotated[str | None, bounded("time", "Last changed before (ISO-8601).")] = None,
        mode: Annotated[
            Literal["hybrid", "keyword", "vector"], Field(description="How a query is matched.")
        ] = "hybrid",
        sort: Annotated[
            Literal["relevance", "importance", "recent"] | None,
            Field(description="Default: relevance with a query, importance without."),
        ] = None,
        limit: Annotated[int, bounded("limit", "How many results, 1 to 100.")] = 10,
        include_content: Annotated[bool, Field(description="Return each memory's full content.")] = False,
        include_superseded: Annotated[bool, Field(description="Also memories replaced by others.")] = False,
    ) -> dict[str, Any]:
        service = app_of(ctx).service

        def run() -> dict[str, Any]:
            filters = msgspec.structs.replace(
                make_filters(type, tags, scope, min_importance, created_after, created_before, include_superseded),
                max_importance=max_importance,
                updated_after=updated_after,
                updated_before=updated_before,
            )
            hits = service.search(
                query,
                limit=limit,
                filters=filters,
                project=project,
                mode=mode,
                sort=sort,
                include_content=include_content,
                access=True,
            )
            return {"status": "success", "results": dump(hits)}

        out = call(run)
        if warnings := service.warnings():
            out["warnings"] = warnings
        return out

    @server.tool(
        title="Get context",
        description=(
            "The session-start bundle of this project's memory: for each type, its most important and "
            "its most recent memories (global ones marked), as markdown that fits in max_chars. Call it "
            "at the start of a task; then get_memory for the details of what matters."
        ),
        annotations=READ_ONLY,
    )
    def get_context(
        ctx: Context[App, Any],
        max_chars: Annotated[int, bounded("max_chars", "Size budget of the markdown, 200 to 200000.")] = 4000,
        types: Annotated[str | list[str] | None, Field(description="Only these types (default: all).")] = None,
        include_global: Annotated[bool, Field(description="Include your user-wide global memories.")] = True,
        per_type: Annotated[int, bounded("per_type", "At most this many per type; 0 = as the budget allows.")] = 0,
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        bundle = call(
            lambda: service.context(
                max_chars=max_chars, types=as_list(types), include_global=include_global, per_type=per_type
            )
        )
        return {"status": "success", **bundle}

    @server.tool(
        title="Create relationship",
        description=(
            "Link two memories with a typed, directed relationship: SOLVES, CAUSES, RELATED_TO, "
            "SUPERSEDES, DEPENDS_ON, or a free-form lower_snake_case relation; with a strength from 0 to "
            "1 and a short context. Creating the same link again updates its strength and context."
        ),
        annotations=ADDITIVE,
    )
    def create_relationship(
        ctx: Context[App, Any],
        source_id: Annotated[str, bounded("memory_id", "The memory the link starts from.")],
        target_id: Annotated[str, bounded("memory_id", "The memory it points to.")],
        relation: Annotated[str, bounded("relation", "SOLVES, CAUSES, RELATED_TO, SUPERSEDES, DEPENDS_ON…")] = (
            "related_to"
        ),
        strength: Annotated[float, bounded("strength", "0 (weak) to 1 (strong).")] = 1.0,
        context: Annotated[str, bounded("context", "Why they are linked, in a sentence.")] = "",
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        link, created = call(
            lambda: service.link(
                source_id, target_id, relation, strength=strength, context=context, by=client_name(ctx)
            )
        )
        return {"status": "success", "relationship": dump(link), "created": created}

    @server.tool(
        title="Get related memories",
        description=(
            "Memories linked to one, following relationships up to depth hops (1 to 5), nearest first. "
            "relations limits the kinds of link followed; direction 'out' follows links from the memory, "
            "'in' links to it, 'both' (default) either way."
        ),
        annotations=READ_ONLY,
    )
    def get_related_memories(
        ctx: Context[App, Any],
        memory_id: Annotated[str, bounded("memory_id", "The memory to start from.")],
        depth: Annotated[int, bounded("depth", "How many hops, 1 to 5.")] = 1,
        relations: Annotated[str | list[str] | None, Field(description="Only these relations.")] = None,
        direction: Annotated[Literal["out", "in", "both"], Field(description="Which way links are followed.")] = (
            "both"
        ),
        limit: Annotated[int, bounded("related_limit", "At most this many memories, 1 to 500.")] = 50,
        include_superseded: Annotated[bool, Field(description="Also memories replaced by others.")] = False,
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        related = call(
            lambda: service.related(
                memory_id,
                depth=depth,
                relations=as_list(relations),
                direction=direction,
                limit=limit,
                include_superseded=include_superseded,
            )
        )
        return {"status": "success", "memory_id": memory_id, "related": related}

    @server.tool(
        title="Promote memory",
        description=(
            "Make a memory long-term: its TTL no longer applies. (Memories saved with importance >= 0.8, "
            "or used 5 times, are promoted automatically.)"
        ),
        annotations=CHANGING,
    )
    def promote_memory(
        ctx: Context[App, Any],
        memory_id: Annotated[str, bounded("memory_id", "The memory's id.")],
        reason: Annotated[str, bounded("reason", "Why it matters; kept in the history.")] = "",
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        memory, changed = call(lambda: service.promote(memory_id, reason=reason, by=client_name(ctx)))
        return {"status": "success", "memory": dump(memory), "promoted": changed}

    @server.tool(
        title="Supersede a memory",
        description=(
            "Replace a wrong or outdated memory by a corrected one. The new memory keeps the old one's "
            "type, title, tags, importance and scope unless you give them; a SUPERSEDES link records the "
            "replacement, the old memory stays in the history and is no longer returned by default."
        ),
        annotations=ADDITIVE,
    )
    def supersede(
        ctx: Context[App, Any],
        memory_id: Annotated[str, bounded("memory_id", "The memory being replaced.")],
        content: Annotated[str, bounded("content", "The corrected memory.")],
        reason: Annotated[str, bounded("reason", "What was wrong; kept on the link.")] = "",
        title: Annotated[str | None, bounded("title", "The new memory's title; default: the old one's.")] = None,
        summary: Annotated[str | None, bounded("summary", "One or two sentences; optional.")] = None,
        tags: Annotated[list[TagText] | None, bounded("tags", "Default: the old one's tags.")] = None,
        type: Annotated[str | None, Field(description=KIND_HELP)] = None,
        importance: Annotated[float | None, bounded("importance", "Default: the old one's.")] = None,
        ttl_seconds: Annotated[
            int | None, bounded("ttl_seconds", "Seconds until it expires; omit for long-term.")
        ] = None,
    ) -> dict[str, Any]:
        service = app_of(ctx).service
        memory, link = call(
            lambda: service.supersede(
                memory_id,
                content,
                title=title,
                summary=summary,
                tags=tags,
                kind=type,
                importance=importance,
                ttl_seconds=ttl_seconds,
                reason=reason,
                by=client_name(ctx),
            )
        )
        return {"status": "success", "memory": dump(memory), "superseded": memory_id, "relationship": dump(link)}

    register_interchange(server)  # import_memories, export_memories
