"""The service as one object over its parts: settings given to an open service reach all of them."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from conftest import journal_bytes, reopen

from eventmem.core.errors import LimitExceeded, StaleVersion
from eventmem.service import MemoryService
from eventmem.service.browsing import memory_version


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


def test_a_conditional_change_is_refused_once_another_writer_moved_the_memory_on_and_writes_nothing(
    project: Path, service: MemoryService
) -> None:
    saved = service.save("The release train leaves on Tuesdays.")
    seen = memory_version(service, saved.id)
    other = reopen(project)  # another process on the same project
    try:
        other.update(saved.id, content="The release train leaves on Wednesdays.")
    finally:
        other.close()
    before = journal_bytes(project)
    with pytest.raises(StaleVersion, match="changed since that version"):
        service.update(saved.id, content="The release train leaves on Mondays.", if_version=[seen])
    with pytest.raises(StaleVersion):
        service.delete(saved.id, if_version=[seen])
    assert journal_bytes(project) == before
    current = memory_version(service, saved.id)
    assert service.update(saved.id, importance=0.9, if_version=[current]).importance == 0.9
    assert service.delete(saved.id, if_version=[memory_version(service, saved.id)]).status == "deleted"
