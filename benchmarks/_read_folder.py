"""Reading a real folder as `index build` reads it: files read and skipped (by reason), documents,
words, and the time, per file type — no embedding, so it measures the readers alone. The
``--read FOLDER`` mode of ``benchmarks/folder.py``:

    python benchmarks/folder.py --read /usr/share/doc [--include GLOB ...] [--exclude GLOB ...]
        [--max-file-size BYTES] [--no-ignore-files] [--repeat N]

It prints the machine, the counts the CLI's summary line would give, the files read per type
(by the name, ``.gz`` looked through; ``(content)`` for names judged by their bytes) and the
median of ``--repeat`` runs (the first warms the page cache).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from _machine import machine_header  # noqa: E402

from meteora_edge.fileio import MAX_INPUT_BYTES  # noqa: E402
from meteora_edge.index.corpus import read_documents  # noqa: E402
from meteora_edge.index.file_choice import FileChoice  # noqa: E402
from meteora_edge.index.skips import SkipTally  # noqa: E402
from meteora_edge.readers import kind_by_name  # noqa: E402


def read_folder(folder: str, *, include: list[str], exclude: list[str], max_file_size: int, no_ignore_files: bool,
                repeat: int) -> None:
    """Print what reading ``folder`` gives and how long it takes (the median of ``repeat`` runs)."""
    choice = FileChoice(include=tuple(include), exclude=tuple(exclude),
                        ignore_files=not no_ignore_files, max_file_bytes=max_file_size)
    print(machine_header(("charset-normalizer", "selectolax", "pypdfium2", "python-docx", "pathspec")))
    times = []
    for _ in range(max(1, repeat)):
        tally = SkipTally()
        started = time.perf_counter()
        documents = read_documents([folder], on_skip=tally, choice=choice)
        times.append(time.perf_counter() - started)
    files = {d.file for d in documents}
    by_type = Counter(kind_by_name(os.path.basename(f or "")) or "(content)" for f in files)
    read, skipped = len(files), len(tally)
    print(f"folder: {folder}")
    print(f"files read {read:,}, skipped {skipped:,}: {100 * read / max(1, read + skipped):.1f} % read")
    print(tally.summary() or "skipped nothing")
    print("files read by type: " + ", ".join(f"{kind} {count:,}" for kind, count in by_type.most_common()))
    print(f"documents {len(documents):,}, words {sum(len(d.text.split()) for d in documents):,}")
    print(f"read time over {len(times)} runs: median {statistics.median(times):.2f} s "
          f"(min {min(times):.2f}, max {max(times):.2f}); load average {os.getloadavg()[0]:.1f}")
