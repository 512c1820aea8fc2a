"""The project-context family: the shared project-memory protocol's tools, its two workflow prompts,
and the ``.ai/`` view as resources (``memory://ai/<file>``) with update notifications.

Argument and result names follow the protocol's camelCase (``coreContext``, ``writeToRecentChanges``).
Every tool is a thin adapter over :class:`~eventmem.project_context.ProjectContext`.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from eventmem.errors import InvalidInput
from eventmem.mcp_app import (
    ADDITIVE,
    CHANGING,
    DESTRUCTIVE,
    READ_ONLY,
    App,
    EntryText,
    Running,
    app_of,
    bounded,
    call,
    client_name,
)
from eventmem.mcp_sdk import registered_tool
from eventmem.pmp import SECTIONS, Section, render_section
from eventmem.project_context import ProjectContext, is_section_memory

__all__ = ["AI_URI", "register", "register_resources", "view_updates"]

log = logging.getLogger("eventmem.mcp")

AI_URI = "memory://ai/{file}"
SECTION_NAMES = ", ".join(section.key for section in SECTIONS)

Mode = Literal["replace", "append"]


def _context(ctx: Context[App, Any]) -> ProjectContext:
    return ProjectContext(app_of(ctx).service, by=client_name(ctx))


def register(server: MCPServer[App]) -> None:
    def exposed(name: str) -> bool:
        return registered_tool(server, name) is not None

    # -- reading ---------------------------------------------------------------------------------

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
        return call(lambda: _context(ctx).bootstrap())

    @server.tool(
        title="Get project context",
        description="Every project-context section in full, as markdown, with the file each is rendered to.",
        annotations=READ_ONLY,
    )
    def get_project_context(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: _context(ctx).full())

    @server.tool(
        title="Get current task",
        description="The current task: what is being worked on now, the next step and the open questions.",
        annotations=READ_ONLY,
    )
    def get_current_task(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: _context(ctx).current_task())

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
        return call(lambda: _context(ctx).effective_root())

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
        return call(lambda: _context(ctx).update_current_task(task, mode=mode))

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
        return call(lambda: _context(ctx).write_section(section, content, mode=mode, title=title))

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
        return call(lambda: _context(ctx).add_decision(decision, title=title, rationale=rationale))

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
            lambda: _context(ctx).record_conversation_summary(
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
            lambda: _context(ctx).suggest_updates(
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
        return call(lambda: _context(ctx).git_diff(write_to_recent_changes=writeToRecentChanges))

    # -- optimization ----------------------------------------------------------------------------

    @server.tool(
        title="Suggest memory optimization",
        description=(
            "A dry run: what apply_memory_optimization would do (create missing sections, flag placeholder "
            "text, remove duplicate entries, tidy blank lines, archive all but the 3 most recent recent "
            "changes, trim a section near its size limit). Writes nothing."
        ),
        annotations=READ_ONLY,
    )
    def suggest_memory_optimization(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: {"status": "success", "plan": _context(ctx).plan().to_dict()})

    @server.tool(
        title="Apply memory optimization",
        description=(
            "Carry out the optimization plan (see suggest_memory_optimization). Archived and removed entries "
            "keep their history in the journal and its archive."
        ),
        annotations=DESTRUCTIVE,
    )
    def apply_memory_optimization(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: _context(ctx).apply())

    @server.tool(
        title="Optimize AI memory",
        description="One step: plan and apply the memory optimization (dryRun=true only plans).",
        annotations=DESTRUCTIVE,
    )
    def optimize_ai_memory(
        ctx: Context[App, Any],
        dryRun: Annotated[bool, Field(description="Only say what would be done.")] = False,
    ) -> dict[str, Any]:
        context = _context(ctx)
        if dryRun:
            return call(lambda: {"status": "success", "dryRun": True, "plan": context.plan().to_dict()})
        return call(lambda: {"dryRun": False} | context.apply())

    # -- workflows -------------------------------------------------------------------------------

    @server.tool(
        title="Run the project-open workflow",
        description=(
            "Everything to start a session in one call: the project root, the bootstrap context, the "
            "uncommitted git changes, an optimization plan when the memory needs tidying, and next steps."
        ),
        annotations=READ_ONLY,
    )
    def run_project_open_workflow(ctx: Context[App, Any]) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            context = _context(ctx)
            out = context.effective_root() | context.bootstrap()
            out["gitDiff"] = context.git_diff()
            plan = context.plan()
            steps = ["Read coreContext; it is the project, its architecture, its style and the current task."]
            if out["recommendedNextFiles"]:
                steps.append("Read recommendedNextFiles for the entries left out of supplementalContext.")
            if out["warnings"]:
                steps.append("Fill in the sections named in warnings once you know enough.")
            if plan.needed:
                out["optimizationPlan"] = plan.to_dict()
                steps.append("The memory needs tidying: apply_memory_optimization carries out optimizationPlan.")
            steps.append("At the end, run_conversation_end_workflow (completed=true records the summary).")
            out["nextSteps"] = steps
            return out

        return call(run)

    @server.tool(
        title="Run the conversation-end workflow",
        description=(
            "End of a conversation: always the suggested context updates; with completed=true also records "
            "the summary (and currentTask, recentChanges, decisions if given); an optimization plan is "
            "attached when the memory needs tidying."
        ),
        annotations=ADDITIVE,
    )
    def run_conversation_end_workflow(
        ctx: Context[App, Any],
        summary: Annotated[str, bounded("content", "What happened in this conversation.")],
        completed: Annotated[bool, Field(description="Record the summary now.")] = False,
        title: Annotated[str | None, bounded("title", "A few words; optional.")] = None,
        currentTask: Annotated[str | None, bounded("content", "The new current task; optional.")] = None,
        recentChanges: Annotated[list[EntryText] | None, bounded("entries", "Changes made; optional.")] = None,
        decisions: Annotated[list[EntryText] | None, bounded("entries", "Decisions taken; optional.")] = None,
        includeGitDiff: Annotated[bool, Field(description="Look at uncommitted changes too.")] = True,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            context = _context(ctx)
            out: dict[str, Any] = {"status": "success", "completed": completed}
            suggested = context.suggest_updates(
                summary=summary,
                current_task=currentTask,
                decisions=decisions,
                recent_changes=recentChanges,
                include_git_diff=includeGitDiff,
            )
            out["suggestions"] = suggested["suggestions"]
            out["skipped"] = suggested["skipped"]
            if completed:
                recorded = context.record_conversation_summary(
                    summary, title=title, current_task=currentTask, recent_changes=recentChanges, decisions=decisions
                )
                out["recorded"] = recorded
                if recorded["status"] == "paused":
                    out["status"] = "paused"
                    out["message"] = recorded["message"]
            plan = context.plan()
            if plan.needed:
                out["optimizationPlan"] = plan.to_dict()
            return out

        return call(run)

    # -- prompts ---------------------------------------------------------------------------------

    @server.prompt(
        name="project_open",
        title="Open the project",
        description="Start a session with the project's shared context loaded, and what to do next.",
    )
    def project_open(ctx: Context[App, Any]) -> str:
        data = call(lambda: _context(ctx).bootstrap())
        lines = [
            "You are starting work on this project. Here is its shared context, kept by eventmem in the "
            "project's git repository.",
            "",
        ]
        for section in SECTIONS:
            if section.core:
                text = data["coreContext"][section.key].strip() or "_(empty)_"
                lines += [f"## {section.title}", "", text, ""]
        for section in SECTIONS:
            if not section.core:
                brief = data["supplementalContext"][section.key]
                lines.append(f"## {section.title} ({brief['count']})")
                lines += [f"- {line}" for line in brief["entries"]] or ["_(none)_"]
                lines.append("")
        if data["recommendedNextFiles"]:
            lines += ["Read next: " + ", ".join(data["recommendedNextFiles"]), ""]
        if data["warnings"]:
            lines += ["Warnings:", *[f"- {w}" for w in data["warnings"]], ""]
        lines.append(
            "Keep the current task up to date with update_current_task as the work moves on."
            if exposed("update_current_task")
            else "Keep the current task up to date as the work moves on."
        )
        return "\n".join(lines)

    @server.prompt(
        name="conversation_end",
        title="End the conversation",
        description="Record what this conversation did in the project's shared context.",
    )
    def conversation_end(
        ctx: Context[App, Any],
        summary: str = "",
    ) -> str:
        context = _context(ctx)
        task = call(context.current_task)
        lines = ["This conversation is ending. Record it in the project's shared context.", ""]
        if summary.strip():
            lines += ["What it did, in the user's words:", "", summary.strip(), ""]
        lines += ["The current task is:", "", task["currentTask"].strip() or "_(empty)_", ""]
        tool = "run_conversation_end_workflow" if exposed("run_conversation_end_workflow") else None
        if tool:
            lines.append(
                "Call run_conversation_end_workflow with a short summary, completed=true, and, if they changed, "
                "currentTask, recentChanges (one per item) and decisions (one per item)."
            )
        else:
            lines.append(
                "Call record_conversation_summary with a short summary and, if they changed, currentTask, "
                "recentChanges (one per item) and decisions (one per item)."
            )
        if exposed("apply_memory_optimization"):
            lines.append("If the result carries an optimizationPlan, call apply_memory_optimization.")
        return "\n".join(lines)


# -- the .ai view as resources --------------------------------------------------------------------


def register_resources(server: MCPServer[App], running: Running) -> None:
    """``memory://ai/<file>``: each section rendered as its ``.ai/`` markdown file (read from the
    memory ``running`` holds: static resources get no Context in the SDK)."""

    def add(section: Section) -> None:
        def read() -> str:
            return render_section(section, ProjectContext(running.service()).sections()[section.key])

        server.resource(
            AI_URI.format(file=section.file),
            name=f"ai-{section.file.removesuffix('.md')}",
            title=f"{section.title} (.ai/{section.file})",
            description=f"The project's {section.title.lower()}: {section.hint}.",
            mime_type="text/markdown",
        )(read)

    for section in SECTIONS:
        add(section)


def view_updates(app: App, everything: bool, changed: set[str]) -> set[str]:
    """After the journal changed: re-render the ``.ai`` view of the app's memory if a section may have
    changed, and return the URIs of the files whose text differs from what the app last announced."""
    service = app.service_
    if service is None:
        return set()
    try:
        store = service.project
        if not everything:
            with store.lock:
                memories = store.state.memories
                relevant = any(
                    is_section_memory(m, record.kind if (record := memories.get(m)) is not None else "")
                    for m in changed
                )
            if not relevant:
                return set()
        context = ProjectContext(service)
        if app.announced is None and not any(context.sections().values()):
            return set()  # no project context in this memory: nothing to render or announce
        view = context.render_view()
        notified = app.announced = {} if app.announced is None else app.announced
        uris: set[str] = set()
        for name, text in view["files"].items():
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if notified.get(name) != digest:
                notified[name] = digest
                uris.add(AI_URI.format(file=name))
        return uris
    except InvalidInput as exc:  # a refused render folder (a link, a path outside): said in one line
        log.warning("could not render the .ai view: %s", exc)
        return set()
    except Exception:  # the watcher must outlive a failed render
        log.exception("could not render the .ai view")
        return set()
