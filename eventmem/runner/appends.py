"""Appends decided on the journal as it is: the plan runs under the journal lock, after a catch-up."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from eventmem.core.errors import JournalUnwritable
from eventmem.core.events import AnyEvent
from eventmem.journal.journal import describe_os_error
from eventmem.runner.cursors import cursor_past

if TYPE_CHECKING:
    from eventmem.runner.runner import Store

__all__ = ["append_planned"]


def append_planned(store: Store, plan: Callable[[], list[AnyEvent]]) -> list[AnyEvent]:
    """Decide what to append on the current state of the journal, with no other writer in between.

    Holds the journal lock, catches up (so the fold includes whatever any process wrote), calls
    ``plan`` and appends what it returns. Used where an event must be written once (a promotion,
    an expiry, a save that may be a duplicate, a conditional change): two processes doing the same
    thing take turns, and the second one's ``plan`` sees the first one's events."""
    with store.lock:
        try:
            store.paths.ensure()
            with store.journal.lock.hold():
                store.catch_up()
                events = store.scrubbed(plan())
                if events:
                    appended = store.journal.append_located(events, locked=True)
                    store.apply_local(events)
                    # the cursor covers what was just written; the texts of these events are
                    # indexed after the reply (see defer_after_reply)
                    if appended is None or not cursor_past(store, appended, len(events)):
                        store.catch_up(flush=False)
                    else:  # (their lines will not be read back)
                        for event in events:
                            store.state.unread.pop(event.id, None)
        except OSError as exc:
            raise JournalUnwritable(describe_os_error(exc)) from exc
        return events
