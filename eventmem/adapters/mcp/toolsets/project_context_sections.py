"""The project-context tools that read and write sections: bootstrap, full context, current task,
effective root, section updates, decisions, conversation summaries, suggestions and the git summary."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from eventmem.adapters.mcp.app import ADDITIVE, CHANGING, READ_ONLY, App, EntryText, app_of, bounded, call, client_name
from eventmem.context.project_context import ProjectContext
from eventmem.core.sections import SECTIONS

__all__ = ["Mode", "context_of", "register_section_tools"]

SECTION_NAMES = ", ".join(section.key for section in SECTIONS)

Mode = Literal["replace", "append"]


def context_of(ctx: Context[App, Any]) -> ProjectContext:
    """The project context of the calling client's service, writing as that client."""
    return ProjectContext(app_of(ctx).service, by=client_name(ctx))


def register_section_tools(server: MCPServer[App]) -> None:

    @server.tool(
        title="Bootstrap project context",
        description=(
            "Start of a session: the project's shared context. coreContext has project, currentTask, "
            "architecture and codingStyle in full; supplementalContext has recent changes, decisions, "
            "conversation summaries and todo in brief; recommendedNextFiles lists the rendered .ai files "
            "worth reading in full; warnings name sections that are missing or still placeholders."
        ),
        annotations=READ_ONLY,
    )
    def bootstrap_project_context(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: context_of(ctx).bootstrap())

    @server.tool(
        title="Get project context",
        description="Every project-context section in full, as markdown, with the file each is rendered to.",
        annotations=READ_ONLY,
    )
    def get_project_context(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: context_of(ctx).full())

    @server.tool(
        title="Get current task",
        description="The current task: what is being worked on now, the next step and the open questions.",
        annotations=READ_ONLY,
    )
    def get_current_task(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: context_of(ctx).current_task())

    @server.tool(
        title="Get effective project root",
        description=(
            "Which project this server keeps memory for: projectRoot, memoryRoot (its .eventmem folder), "
            "projectRootSource (why that root: env:EVENTMEM_ROOT, env:PROJECT_MEMORY_ROOT, marker:.git…) "
            "and where the .ai view is rendered."
        ),
        annotations=READ_ONLY,
    )
    def get_effective_project_root(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: context_of(ctx).effective_root())

    # -- writing ---------------------------------------------------------------------------------

    @server.tool(
        title="Update current task",
        description=(
            "Replace the current task (mode 'replace', the default) or add to it (mode 'append'). Say "
            "what is being worked on, the next step and the open questions."
        ),
        annotations=CHANGING,
    )
    def update_current_task(
        ctx: Context[App, Any],
        task: Annotated[str, bounded("content", "The current task, in markdown.")],
        mode: Annotated[Mode, Field(description="'replace' (default) or 'append'.")] = "replace",
    ) -> dict[str, Any]:
        return call(lambda: context_of(ctx).update_current_task(task, mode=mode))

    @server.tool(
        title="Update a context section",
        description=(
            f"Write one project-context section ({SECTION_NAMES}). project, architecture, currentTask and "
            "codingStyle are one text each: 'replace' or 'append'. The others are lists: 'append' adds an entry."
        ),
        annotations=CHANGING,
    )
    def update_context_section(
        ctx: Context[App, Any],
        section: Annotated[str, Field(description=f"One of: {SECTION_NAMES}.")],
        content: Annotated[str, bounded("content", "The text, in markdown.")],
        mode: Annotated[Mode, Field(description="'replace' or 'append'.")] = "replace",
        title: Annotated[str | None, bounded("title", "A title for a list entry; optional.")] = None,
    ) -> dict[str, Any]:
        return call(lambda: context_of(ctx).write_section(section, content, mode=mode, title=title))

    @server.tool(
        title="Add decision",
        description="Record a decision (dated), with its rationale if you have one.",
        annotations=ADDITIVE,
    )
    def add_decision(
        ctx: Context[App, Any],
        decision: Annotated[str, bounded("content", "What was decided.")],
        title: Annotated[str | None, bounded("title", "A short title; default: its first sentence.")] = None,
        rationale: Annotated[str | None, bounded("content", "Why; optional.")] = None,
    ) -> dict[str, Any]:
        return call(lambda: context_of(ctx).add_decision(decision, title=title, rationale=rationale))

    @server.tool(
        title="Record conversation summary",
        description=(
            "End of a conversation: append a dated summary. In the same call, optionally replace the current "
            "task, append recent changes and add decisions. If a section would go over its size limit, "
            "nothing is written and the result carries the optimization plan (status 'paused')."
        ),
        annotations=ADDITIVE,
    )
    def record_conversation_summary(
        ctx: Context[App, Any],
        summary: Annotated[str, bounded("content", "What happened in this conversation.")],
        title: Annotated[str | None, bounded("title", "A few words; optional.")] = None,
        currentTask: Annotated[str | None, bounded("content", "The new current task; optional.")] = None,
        recentChanges: Annotated[list[EntryText] | None, bounded("entries", "Changes made, one per item.")] = None,
        decisions: Annotated[list[EntryText] | None, bounded("entries", "Decisions taken, one per item.")] = None,
    ) -> dict[str, Any]:
        return call(
            lambda: context_of(ctx).record_conversation_summary(
                summary, title=title, current_task=currentTask, recent_changes=recentChanges, decisions=decisions
            )
        )

    @server.tool(
        title="Suggest context updates",
        description=(
            "Which sections to change after some work, 'append' or 'replace', each with a preview and the tool "
            "call that would do it. Give what you know (summary, currentTask, decisions, recentChanges); "
            "uncommitted git changes are looked at too. Writes nothing."
        ),
        annotations=READ_ONLY,
    )
    def suggest_context_updates(
        ctx: Context[App, Any],
        summary: Annotated[str | None, bounded("content", "What happened; optional.")] = None,
        currentTask: Annotated[str | None, bounded("content", "The new current task; optional.")] = None,
        decisions: Annotated[list[EntryText] | None, bounded("entries", "Decisions taken; optional.")] = None,
        recentChanges: Annotated[list[EntryText] | None, bounded("entries", "Changes made; optional.")] = None,
        includeGitDiff: Annotated[bool, Field(description="Look at uncommitted changes too.")] = True,
    ) -> dict[str, Any]:
        return call(
            lambda: context_of(ctx).suggest_updates(
                summary=summary,
                current_task=currentTask,
                decisions=decisions,
                recent_changes=recentChanges,
                include_git_diff=includeGitDiff,
            )
        )

    @server.tool(
        title="Summarize git diff",
        description=(
            "Changed files and diff stats of the working tree (staged, unstaged, untracked). Outside a git "
            "repository the result says available=false and why. writeToRecentChanges appends the summary "
            "to recent changes."
        ),
        annotations=ADDITIVE,
    )
    def summarize_git_diff(
        ctx: Context[App, Any],
        writeToRecentChanges: Annotated[bool, Field(description="Append the summary to recent changes.")] = False,
    ) -> dict[str, Any]:
        return call(lambda: context_of(ctx).git_diff(write_to_recent_changes=writeToRecentChanges))
