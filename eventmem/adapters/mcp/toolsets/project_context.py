"""The project-context family: the shared project-memory protocol's tools, its two workflow prompts,
and the ``.ai/`` view as resources (``memory://ai/<file>``) with update notifications.

Argument and result names follow the protocol's camelCase (``coreContext``, ``writeToRecentChanges``).
The tools are in :mod:`~eventmem.adapters.mcp.toolsets.project_context_sections` and
:mod:`~eventmem.adapters.mcp.toolsets.project_context_workflows`, the resources in
:mod:`~eventmem.adapters.mcp.toolsets.project_context_resources`; every tool is a thin adapter over
:class:`~eventmem.context.project_context.ProjectContext`.
"""

from __future__ import annotations

from mcp.server import MCPServer

from eventmem.adapters.mcp.app import App
from eventmem.adapters.mcp.toolsets.project_context_resources import AI_URI, register_resources, view_updates
from eventmem.adapters.mcp.toolsets.project_context_sections import register_section_tools
from eventmem.adapters.mcp.toolsets.project_context_workflows import register_workflow_tools

__all__ = ["AI_URI", "register", "register_resources", "view_updates"]


def register(server: MCPServer[App]) -> None:
    """Every tool and prompt of the family (the resources are registered by :func:`register_resources`)."""
    register_section_tools(server)
    register_workflow_tools(server)
