"""The project-context tools that tidy and run workflows: the optimization, the project-open and
conversation-end workflows, and the two workflow prompts."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from eventmem.adapters.mcp.app import ADDITIVE, DESTRUCTIVE, READ_ONLY, App, EntryText, bounded, call
from eventmem.adapters.mcp.sdk import registered_tool
from eventmem.adapters.mcp.toolsets.project_context_sections import context_of
from eventmem.core.sections import SECTIONS

__all__ = ["register_workflow_tools"]


def register_workflow_tools(server: MCPServer[App]) -> None:
    def exposed(name: str) -> bool:
        return registered_tool(server, name) is not None

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
        return call(lambda: {"status": "success", "plan": context_of(ctx).plan().to_dict()})

    @server.tool(
        title="Apply memory optimization",
        description=(
            "Carry out the optimization plan (see suggest_memory_optimization). Archived and removed entries "
            "keep their history in the journal and its archive."
        ),
        annotations=DESTRUCTIVE,
    )
    def apply_memory_optimization(ctx: Context[App, Any]) -> dict[str, Any]:
        return call(lambda: context_of(ctx).apply())

    @server.tool(
        title="Optimize AI memory",
        description="One step: plan and apply the memory optimization (dryRun=true only plans).",
        annotations=DESTRUCTIVE,
    )
    def optimize_ai_memory(
        ctx: Context[App, Any],
        dryRun: Annotated[bool, Field(description="Only say what would be done.")] = False,
    ) -> dict[str, Any]:
        context = context_of(ctx)
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
            context = context_of(ctx)
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
            context = context_of(ctx)
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
        data = call(lambda: context_of(ctx).bootstrap())
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
        context = context_of(ctx)
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
