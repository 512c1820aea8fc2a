"""Moved to :mod:`eventmem.context.project_context`; the name stays here only for the service, until it
imports it from there."""

from __future__ import annotations

from eventmem.context.project_context import ProjectContext

__all__ = ["ProjectContext"]
