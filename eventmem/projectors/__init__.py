"""Projectors: read models derived from the journal, fed folded batches through one contract."""
