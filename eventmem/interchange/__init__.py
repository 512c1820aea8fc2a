"""Importers and exporters: other memory stores, notes and instruction files in, portable formats out.

One module per format reads its files into a :class:`~eventmem.interchange.mapping.Bundle`;
:mod:`~eventmem.interchange.plan` compares it with the project's memory (the dry-run) and
:mod:`~eventmem.interchange.batch` appends the plan as one batch. Writers take what
:mod:`~eventmem.interchange.exporting` collects from the fold. The formats are listed in
:mod:`~eventmem.interchange.formats`.
"""
