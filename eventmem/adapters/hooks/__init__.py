"""Automatic memory through the clients' own lifecycle hooks (Claude Code, Codex, Gemini CLI, Cursor).

``eventmem hook CLIENT`` answers one hook event read on stdin in that client's format: at session
start the project-open bundle, at a prompt the few memories relevant to it, at the end of a turn or a
session what the conversation decided, fixed and left to do, written to the journal as one batch by
one writer. ``eventmem hooks install|uninstall|status|review|pending`` manage the wiring and what the
hooks wrote. See ``docs/hooks.md``.

This package's ``__init__`` imports nothing: the hook's fast path (:mod:`.fastpath`) runs on the
standard library alone and loads the service only to write, or when its index is missing or stale.
"""
