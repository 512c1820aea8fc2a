"""``eventmem check``: what a branch's journal would do to everyone who merges it.

Everything is read from git objects (``git ls-tree``, ``git cat-file``, ``git blame``), never from
the working tree, so the check sees exactly what the branch would merge. The branch is compared
with its merge base with the target branch; a finding is an error that fails the check:

- ``undecodable``: an added line that is not an event (the decoder's own message);
- ``future-stamp``: an added event stamped more than 5 minutes after the commit that added it (or
  after now): last writer wins by stamp, so it would win every edit until the clocks catch up;
- ``reused-id``: an added event whose id the base (or another added line) holds with different
  content, or an added ``saved`` of a memory id that already exists with another creator;
- ``unknown-memory``: an added event about a memory (or link) that neither the base's journal nor
  the branch creates: the branch could not have seen it;
- ``rewritten-history``: a base segment whose bytes are not a prefix of the branch's, a removed
  segment, a changed archive segment. The one rewrite allowed is compaction's
  (:func:`eventmem.service.lifecycle.archive_memories`): lines moved byte for byte out of a journal
  segment into a new archive segment that an added ``archived`` event of that segment names;
- ``network-setting``: a tracked ``.eventmem/config.toml`` that reaches the network or reads the
  environment (:func:`eventmem.journal.config.network_settings`);
- ``symlink``: a symlink (git mode 120000) in ``.eventmem/`` or in the tracked render folder;
- ``too-large``: a blob larger than :data:`eventmem.core.limits.MAX_CHECKED_BLOB_BYTES`, left unread.

Reading git is in :mod:`eventmem.review.check_git`, the added lines in :mod:`eventmem.review.check_segments`, the
rules in :mod:`eventmem.review.check_rules`.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from eventmem.journal.history import default_base, git, merge_base
from eventmem.review.audit_report import Finding
from eventmem.review.check_git import (
    SYMLINK,
    commit_of,
    commit_times,
    error_finding,
    ls_links,
    ls_tree,
    odd_segments,
    read_config,
    render_folder,
)
from eventmem.review.check_rules import Rules
from eventmem.review.check_segments import Segments, decode_lines

__all__ = ["CheckReport", "check_branch"]


class CheckReport(msgspec.Struct, kw_only=True):
    base: str
    """The revision compared with, as given or as chosen (``origin/HEAD``, ``main``, ``master``)."""
    base_chosen: bool
    """``base`` was chosen by the check, not given."""
    fork: str
    """The merge base of ``base`` and ``head``: the journal the branch started from."""
    head: str
    events_added: int
    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


def check_branch(root: Path, base: str | None = None, head: str = "HEAD", *, now: float | None = None) -> CheckReport:
    """Check what ``head`` adds to the journal of the project at ``root`` since its merge base with
    ``base`` (default: :func:`eventmem.journal.history.default_base`)."""
    now = time.time() if now is None else now
    base_name = base or default_base(root)
    head_commit = commit_of(root, head)
    fork = merge_base(root, commit_of(root, base_name), head_commit, names=(base_name, head))
    memory_dir = git(root, "rev-parse", "--show-prefix").decode("utf-8", "surrogateescape").strip() + ".eventmem"
    findings: list[Finding] = []
    head_tree = ls_tree(root, head_commit, [memory_dir])
    fork_tree = ls_tree(root, fork, [memory_dir])
    config = read_config(root, memory_dir, head_tree, fork_tree, findings, commit=head_commit)
    # a tracked config.local.toml counts as the repository's too, and wins over config.toml
    config |= read_config(
        root, memory_dir, head_tree, fork_tree, findings, name="config.local.toml", commit=head_commit
    )
    folders = [memory_dir, *render_folder(config, memory_dir)]
    head_tree = ls_tree(root, head_commit, folders)
    base_tree = ls_tree(root, fork, folders)
    for path in odd_segments(root, head_commit, memory_dir).keys() - odd_segments(root, fork, memory_dir).keys():
        message = "a segment that is not a regular file (a folder or a submodule): no eventmem reads it"
        findings.append(error_finding("not-a-file", path, 0, -1, message))
    for folder in folders[1:]:  # a link on the way to the render folder leads out of the project too
        parents = [parent.as_posix() for parent in Path(folder).parents if parent.parts]
        head_links, base_links = (ls_links(root, commit, parents) for commit in (head_commit, fork))
        head_tree |= {path: blob for path, blob in head_links.items() if base_links.get(path) != blob}
    derived = (f"{memory_dir}/cache/", f"{memory_dir}/local/")
    for path, blob in sorted(head_tree.items()):
        if path.startswith(derived) and base_tree.get(path) != blob:
            message = (
                "a file of this clone's own cache is tracked: a snapshot from a branch can hold memories "
                "no journal line has; `git rm --cached` it"
            )
            findings.append(error_finding("tracked-cache", path, 0, -1, message))
        if blob.mode == SYMLINK and base_tree.get(path) != blob:
            message = "a symlink (git mode 120000): paths must never leave the project"
            findings.append(error_finding("symlink", path, 0, -1, message))
    segments = Segments(root, memory_dir, base_tree, head_tree, findings)
    added = segments.added_lines()
    events = decode_lines(added, findings)
    Rules(segments.base_events(), now, commit_times(root, head_commit, added, now)).apply(events, findings)
    findings.sort(key=lambda f: (f.path, f.line, f.code))
    return CheckReport(
        base=base_name,
        base_chosen=base is None,
        fork=fork,
        head=head_commit,
        events_added=len(events),
        findings=findings,
    )
