"""The one service every adapter (MCP tools, CLI, replay tool) goes through.

Commands validate their input, turn it into events, append them and fold them in; queries catch up
with the journal first, so what any process wrote before the call began is visible to it. Nothing
here knows about MCP or the terminal.

The parts: :mod:`~eventmem.service.models` (what it returns), :mod:`~eventmem.service.inputs` (argument
checks), :mod:`~eventmem.service.part` (the stores the parts share), :mod:`~eventmem.service.commands`,
:mod:`~eventmem.service.links`, :mod:`~eventmem.service.queries`, :mod:`~eventmem.service.access` (access counting),
:mod:`~eventmem.service.maintenance`, and :mod:`~eventmem.service.app`, the composition root.
"""

from eventmem.service.app import MemoryService, open_service
from eventmem.service.models import Hit, Link, Memory, Saved

__all__ = ["Hit", "Link", "Memory", "MemoryService", "Saved", "open_service"]
