"""Projectors: the derived views of the fold (filter columns, keyword index, vector index, ...)."""
