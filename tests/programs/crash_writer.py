"""A writer for crash tests: appends saves to a project's journal and acknowledges each one.

Prints ``ready`` once started, then the memory id of every save after ``Journal.append`` returned
(that is, after the line was written and fsynced). The test kills it with SIGKILL at a moment of its
choosing and checks that every acknowledged id survived.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eventmem.core.events import MemorySaved
from eventmem.core.ids import new_id, now_iso
from eventmem.journal.journal import Journal
from eventmem.journal.project import ProjectPaths


def main() -> None:
    root, label = Path(sys.argv[1]), sys.argv[2]
    journal = Journal(ProjectPaths(root))
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    count = 0
    while True:
        memory = new_id()
        text = f"{label} save {count}: " + "crash-test payload " * (1 + count % 40)
        journal.append([MemorySaved(id=new_id(), ts=now_iso(), by=label, memory=memory, content=text)])
        out.write(memory + "\n")
        out.flush()
        count += 1


if __name__ == "__main__":
    main()
