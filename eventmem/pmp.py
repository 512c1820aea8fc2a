"""The protocol's pure half moved to :mod:`eventmem.context`; these names stay here only for the
service, until it imports them from :mod:`eventmem.context.sections`."""

from __future__ import annotations

from eventmem.context.sections import Section, singleton_of_kind

__all__ = ["Section", "singleton_of_kind"]
