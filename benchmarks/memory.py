"""Peak memory of chunking against input size: ``meteora-edge chunk`` and the chunking step of ``index build``.

Usage: python benchmarks/memory.py [--sizes 25,50,100,200] [--repeats 3] [--shapes words,one-word]

Each input is a single-line file of the given size in MB: ``words`` (random words, the case of
issue 17: 200 MB took 5.25 GB in ``chunk`` and 5.8 GB in ``index build``) or ``one-word`` (no
whitespace at all, so the whole file is one chunk). Every measurement runs in a fresh process;
its peak RSS comes from ``wait4``. ``chunk`` runs the real command (``-o``, 256-word chunks);
``index chunking`` reads the file with ``read_documents`` and runs the index's own chunking
step (``local_index._chunk_records``, 200-word chunks), everything ``index build`` does
before it embeds. ``baseline`` is the interpreter with the same
imports and no input. The goal is a peak of at most 3x the input.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import machine_header  # noqa: E402

MB = 1_000_000
_INDEX_CHUNKING = """
import sys
from meteora_edge.index.corpus import read_documents
from meteora_edge.index.local_index import _chunk_records  # the index's own chunking step
_chunk_records(read_documents(sys.argv[1:]), 0, 200, None)  # as 'index build' (chunk size 200)
"""
_BASELINE = "import meteora_edge.cli.main, meteora_edge.index.corpus, meteora_edge.index.chunking"


def write_input(path: Path, size: int, shape: str) -> None:
    """A single-line file of ``size`` bytes: random words, or one run without whitespace."""
    rng = random.Random(0)
    vocabulary = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 10))) for _ in range(5000)]
    with open(path, "w", encoding="ascii") as handle:
        written = 0
        while written < size:
            if shape == "one-word":
                block = "x" * min(1 << 20, size - written)
            else:
                block = " ".join(rng.choices(vocabulary, k=20_000)) + " "
                block = block[: size - written]
            handle.write(block)
            written += len(block)


def peak_mb(command: list[str]) -> tuple[float, float]:
    """Run ``command``; return its peak RSS in MB (from wait4) and its wall time in seconds."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{command[:4]} failed: {proc.stderr.read().decode()[-500:] if proc.stderr else ''}")
    return usage.ru_maxrss * 1024 / MB, seconds  # ru_maxrss is in KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25,50,100,200", help="input sizes in MB, comma-separated")
    parser.add_argument("--shapes", default="words,one-word", help="words and/or one-word")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (the median is shown)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(machine_header())
    python = sys.executable
    base = statistics.median(peak_mb([python, "-c", _BASELINE])[0] for _ in range(args.repeats))
    print(f"baseline (interpreter + imports, no input): {base:.0f} MB peak RSS; medians of {args.repeats} runs\n")
    print("peak RSS in MB; 'x in' = peak / input size; 'x in-base' = (peak - baseline) / input size")
    print(f"{'shape':<9} {'input MB':>8} | {'chunk MB':>8} {'x in':>5} {'x in-base':>9} {'s':>5} | "
          f"{'index chunking MB':>17} {'x in':>5} {'x in-base':>9} {'s':>5}")
    with tempfile.TemporaryDirectory(prefix="meteora-memory-") as tmp:
        for shape in args.shapes.split(","):
            for size in sizes:
                source = Path(tmp) / f"{shape}-{size}.txt"
                write_input(source, size * MB, shape)
                chunk = [peak_mb([python, "-m", "meteora_edge.cli.main", "chunk", str(source), "-o",
                                  str(Path(tmp) / "out.json")]) for _ in range(args.repeats)]
                index = [peak_mb([python, "-c", _INDEX_CHUNKING, str(source)]) for _ in range(args.repeats)]
                c_mb, c_s = statistics.median(m for m, _ in chunk), statistics.median(s for _, s in chunk)
                i_mb, i_s = statistics.median(m for m, _ in index), statistics.median(s for _, s in index)
                print(f"{shape:<9} {size:>8} | {c_mb:>8.0f} {c_mb / size:>5.2f} {(c_mb - base) / size:>9.2f} {c_s:>5.1f} | "
                      f"{i_mb:>17.0f} {i_mb / size:>5.2f} {(i_mb - base) / size:>9.2f} {i_s:>5.1f}")
                source.unlink()


if __name__ == "__main__":
    main()
