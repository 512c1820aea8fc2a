"""PostgreSQL with pgvector as one more projection of the journals (``eventmem[postgres]``).

:mod:`.connection` opens the database and names it without its password, :mod:`.schema` migrates it,
:mod:`.projector` keeps one journal's rows, :mod:`.queries` answers filters, keyword, vector and
hybrid searches, :mod:`.sync` folds journals into batches, :mod:`.command` is ``eventmem sync``.
"""
