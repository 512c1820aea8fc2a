"""The shared project-memory protocol (the ``.ai/`` files) on the journal.

The pure half: the eight sections (:mod:`~eventmem.core.sections`), their markdown
(:mod:`~eventmem.context.render`, :mod:`~eventmem.context.parse`) and the optimization plan
(:mod:`~eventmem.context.optimization`). The half on a service:
:class:`~eventmem.context.project_context.ProjectContext`.
"""
