"""One changed note into a local index of 1k, 20k and 100k chunks: ``index add`` and ``index sync``.

The encoder returns precomputed-style random vectors (seeded by the text, 384 dimensions), so
the time it takes is measured apart and the rest is what the index costs: planning against
the source table, chunking, the delta write (hard-linked base files), fsyncs, the switch and
opening the new version. Each note is a file of 10 chunks (50 words each); one run edits one
note (all its 10 chunks change) and measures the write. Medians of ``--repeat`` runs; ``fsyncs``
is how many fsyncs one update makes (most of them run together, see docs/index-sync.md).

    python benchmarks/index_update.py --sizes 1000 20000 [100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _machine import machine_header  # noqa: E402

from meteora_edge.index.corpus import read_documents  # noqa: E402
from meteora_edge.index.local_index import LocalIndex  # noqa: E402

WORDS_PER_CHUNK, CHUNKS_PER_NOTE, DIM = 50, 10, 384
VOCAB = [f"w{i}" for i in range(20_000)]


class RandomEncoder:
    """Random unit vectors seeded by each text; counts its own time."""

    model_id = "random-384"

    def __init__(self) -> None:
        self.seconds = 0.0

    def encode(self, texts: list[str]) -> np.ndarray:
        start = time.perf_counter()
        out = np.stack([np.random.default_rng(abs(hash(t)) % (1 << 32)).standard_normal(DIM) for t in texts])
        self.seconds += time.perf_counter() - start
        return out.astype(np.float32)


class FsyncCounter:
    """Counts os.fsync calls (from any thread) while installed."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = os.fsync

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self._real(fd)

    def __enter__(self) -> FsyncCounter:
        os.fsync = self  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real


def _note(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(VOCAB, size=n * WORDS_PER_CHUNK))


def run(chunks: int, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    encoder = RandomEncoder()
    with tempfile.TemporaryDirectory() as tmp:
        notes = Path(tmp) / "notes"
        notes.mkdir()
        for i in range(chunks // CHUNKS_PER_NOTE):
            (notes / f"note{i:06d}.md").write_text(_note(rng, CHUNKS_PER_NOTE))
        start = time.perf_counter()
        index = LocalIndex.build(Path(tmp) / "ix", read_documents([notes]), encoder, chunk_size=WORDS_PER_CHUNK,
                                 overlap=0)
        build = time.perf_counter() - start
        timings: dict[str, list[float]] = {"add": [], "add_embed": [], "sync": [], "sync_embed": []}
        fsyncs: list[int] = []
        for r in range(repeat):
            for op in ("add", "sync"):
                target = notes / f"note{(2 * r + (op == 'sync')) % (chunks // CHUNKS_PER_NOTE):06d}.md"
                target.write_text(_note(rng, CHUNKS_PER_NOTE))
                encoder.seconds = 0.0
                with FsyncCounter() as counted:
                    start = time.perf_counter()
                    if op == "add":
                        index = index.add(read_documents([target]), encoder)
                    else:
                        index = index.sync([notes], encoder)
                    elapsed = time.perf_counter() - start
                fsyncs.append(counted.calls)
                assert index.added_chunks == CHUNKS_PER_NOTE and index.removed_chunks == CHUNKS_PER_NOTE
                timings[op].append(elapsed - encoder.seconds)
                timings[f"{op}_embed"].append(encoder.seconds)
        return {"build": build, **{k: statistics.median(v) for k, v in timings.items()}, "fsyncs": max(fsyncs),
                "delta": index.manifest["segments"]["delta"], "deleted": index.manifest["segments"]["deleted"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 20000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(machine_header())
    print(f"one note = {CHUNKS_PER_NOTE} chunks of {WORDS_PER_CHUNK} words; medians of {args.repeat} runs; "
          "time without the embedding (shown apart)\n")
    print(f"{'chunks':>8} {'build s':>8} {'add ms':>8} {'(embed)':>8} {'sync ms':>8} {'(embed)':>8} "
          f"{'delta':>6} {'deleted':>7} {'fsyncs':>6}")
    for size in args.sizes:
        row = run(size, args.repeat)
        print(f"{size:>8} {row['build']:>8.1f} {1000 * row['add']:>8.1f} {1000 * row['add_embed']:>8.1f} "
              f"{1000 * row['sync']:>8.1f} {1000 * row['sync_embed']:>8.1f} {row['delta']:>6} {row['deleted']:>7} "
              f"{row['fsyncs']:>6}",
              flush=True)


if __name__ == "__main__":
    main()
