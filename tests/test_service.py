"""The service as one object over its parts: settings given to an open service reach all of them."""

from __future__ import annotations

import msgspec
import pytest

from eventmem.core.errors import LimitExceeded
from eventmem.service import MemoryService


def test_settings_given_to_an_open_service_are_the_ones_its_commands_access_counts_and_compaction_use(
    service: MemoryService,
) -> None:
    kept = service.save("The release checklist lives in docs/release.md", ttl_seconds=3600)
    gone = service.save("The staging database is reset every Monday")
    service.delete(gone.id)
    assert service.compact(dry_run=True)["would_archive"] == []

    service.config = msgspec.structs.replace(
        service.config, max_memory_bytes=64, promote_accesses=1, archive_after_days=0.0
    )

    with pytest.raises(LimitExceeded, match="64 bytes"):
        service.save("a note well over sixty-four bytes long, which the new limit refuses at once")
    with pytest.raises(LimitExceeded, match="64 bytes"):
        service.update(kept.id, content="a note well over sixty-four bytes long, which the new limit refuses")
    service.get(kept.id, access=True)  # one access is now enough to promote it
    assert service.get(kept.id).promoted
    assert service.compact(dry_run=True)["would_archive"] == [gone.id]
