"""Re-run issue 27's local-index findings (D2, D5, S2, M3, H1, T2, T4, M1, M4) and print a table.

A script, not a test module (pytest does not collect it): ``python tests/adversarial/index_findings.py``
from the repository root (about 20 s). Each trial attacks a fresh index in a temporary folder;
the table counts per item the trials, user files or chunks lost, chunks duplicated, Python
tracebacks (any exception that is not a one-line MeteoraError) and trials whose behaviour
was otherwise wrong (a hang, a followed link, a wrong report). All must be zero.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))

COLUMNS = ("trials", "lost", "duplicated", "tracebacks", "failed")


class Tally(dict):
    def __init__(self) -> None:
        super().__init__((c, 0) for c in COLUMNS)


def _guard(tally: Tally, call: Callable[[], object], *, expect_error: bool, seconds: float = 15) -> object:
    """Run ``call`` with a deadline; count a hang, a traceback, or an error where none (or none where one) belongs."""
    from meteora_edge.errors import MeteoraError

    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except MeteoraError as exc:
            outcome["error"] = exc
        except BaseException as exc:  # noqa: BLE001 - counted
            outcome["traceback"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        tally["failed"] += 1  # a hang
        return None
    if "traceback" in outcome:
        tally["tracebacks"] += 1
        return None
    error = outcome.get("error")
    if expect_error != (error is not None) or (error is not None and "\n" in str(error)):
        tally["failed"] += 1
    return outcome.get("value", error)


def _docs(n: int = 3):
    from meteora_edge.index.corpus import SourceDocument

    return [SourceDocument(str(i), f"clause {i} binds party {i} for {i + 3} days") for i in range(n)]


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def d2(tmp: Path, tally: Tally) -> None:
    from meteora_edge import HashingEncoder
    from meteora_edge.index.local_index import LocalIndex

    for trial, overwrite in enumerate((False, True, False, True)):
        out = tmp / f"d2-{trial}"
        for n in range(trial + 1):
            (out / f"gen-{n + 1:06d}-0123abc{n}").mkdir(parents=True)
            (out / f"gen-{n + 1:06d}-0123abc{n}" / "thesis.md").write_text(f"years of work {n}")
        before = _tree(out)
        tally["trials"] += 1
        _guard(tally, lambda: LocalIndex.build(out, _docs(), HashingEncoder(), overwrite=overwrite), expect_error=True)
        tally["lost"] += sum(1 for k, v in before.items() if _tree(out).get(k) != v)


def d5(tmp: Path, tally: Tally) -> None:
    from meteora_edge.index.corpus import read_documents

    for mark in ("\u2028", "\u2029", "\u0085"):
        path = tmp / f"d5-{ord(mark)}.jsonl"
        texts = [f"a{mark}b", "c", f"{mark}d"]
        path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
        tally["trials"] += 1
        docs = _guard(tally, lambda: read_documents([path], strict=True), expect_error=False)
        got = [d.text for d in docs] if isinstance(docs, list) else []
        tally["lost"] += sum(1 for t in texts if t not in got)


def s2_m3(tmp: Path, tally: Tally) -> None:
    from meteora_edge.index.corpus import read_documents

    folder = tmp / "s2"
    folder.mkdir()
    (folder / "real.md").write_text("kept clause")
    (tmp / "secret.txt").write_text("outside secret")
    cases = {
        "outside.txt": lambda p: p.symlink_to(tmp / "secret.txt"),
        "folder-link": lambda p: p.symlink_to(tmp),
        "device.txt": lambda p: p.symlink_to("/dev/null"),
        "broken.txt": lambda p: p.symlink_to(tmp / "nowhere"),
        "pipe.txt": lambda p: os.mkfifo(p),
    }
    expected = {"outside.txt": "outside the folders", "folder-link": "a link to a folder",
                "device.txt": "a link to a device", "broken.txt": "a broken link", "pipe.txt": "a FIFO"}
    for name, make in cases.items():
        make(folder / name)
    seen: dict[str, str] = {}
    tally["trials"] += len(cases)
    docs = _guard(tally, lambda: read_documents([folder], on_skip=lambda p, r: seen.setdefault(p.name, r)),
                  expect_error=False)
    texts = [d.text for d in docs] if isinstance(docs, list) else []
    tally["failed"] += sum(1 for n, needle in expected.items() if needle not in seen.get(n, ""))
    tally["failed"] += texts.count("outside secret")  # followed out of the inputs
    tally["lost"] += 0 if "kept clause" in texts else 1


def t2(tmp: Path, tally: Tally) -> None:
    from meteora_edge import HashingEncoder
    from meteora_edge.index.corpus import read_documents
    from meteora_edge.index.local_index import LocalIndex

    leaf = str(tmp / "deep")
    os.mkdir(leaf)
    for _ in range(1000):
        leaf += "/d"
        os.mkdir(leaf)
    Path(leaf, "bottom.txt").write_text("deep clause")
    tally["trials"] += 1
    index = _guard(tally, lambda: LocalIndex.build(tmp / "t2-ix", read_documents([tmp / "deep"]), HashingEncoder()),
                   expect_error=False)
    tally["lost"] += 0 if index is not None and len(index) == 1 else 1
    _remove_deep(tmp / "deep", leaf)


def _remove_deep(top: Path, leaf: str) -> None:
    """Remove a deep chain of folders bottom-up (shutil.rmtree recurses and fails on it)."""
    for name in os.listdir(leaf):
        os.unlink(os.path.join(leaf, name))
    while leaf != str(top):
        os.rmdir(leaf)
        leaf = os.path.dirname(leaf)
    os.rmdir(leaf)


def h1(tmp: Path, tally: Tally) -> None:
    from meteora_edge import HashingEncoder
    from meteora_edge.index.local_index import LocalIndex

    for name in ("manifest.json", "gen/manifest.json", "gen/vectors.npy", "gen/chunks.jsonl", "gen/bm25_vocab.json"):
        root = tmp / f"h1-{name.replace('/', '-')}"
        index = LocalIndex.build(root, _docs(), HashingEncoder())
        path = root / name.replace("gen", index.generation)
        path.unlink()
        os.mkfifo(path)
        for call in (lambda: LocalIndex.load(root), lambda: index.add(_docs(5), HashingEncoder(), lock_timeout=2)):
            tally["trials"] += 1
            _guard(tally, call, expect_error=True)


def t4(tmp: Path, tally: Tally) -> None:
    try:
        import faiss
        import numpy as np
    except ImportError:
        return
    from meteora_edge import HashingEncoder
    from meteora_edge.index.ann_index import AnnConfig
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.local_index import LocalIndex

    enc = HashingEncoder()
    docs = [SourceDocument(str(i), f"w{i} w{i * 7 % 13} w{i % 5} clause") for i in range(120)]
    for shift in (120, 10_000, -7):
        root = tmp / f"t4-{shift}"
        index = LocalIndex.build(root, docs, enc, chunk_size=16, overlap=0, ann=AnnConfig(kind="ivf"))
        vectors = np.asarray(index.vectors)
        forged = faiss.index_factory(vectors.shape[1], index.manifest["ann"]["factory"], faiss.METRIC_INNER_PRODUCT)
        forged.train(vectors)
        forged.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64) + shift)
        gen = root / index.generation
        (gen / "ann.faiss").write_bytes(bytes(faiss.serialize_index(forged)))
        _rehash(gen)
        tally["trials"] += 1
        _guard(tally, lambda: LocalIndex.load(root).search(enc.encode(["w3 clause"])[0], 5, exact=False),
               expect_error=True)


def _rehash(gen: Path, change: Callable[[dict], None] = lambda m: None) -> None:
    manifest = json.loads((gen / "manifest.json").read_text())
    for name, entry in manifest["files"].items():
        data = (gen / name).read_bytes()
        entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    change(manifest)
    (gen / "manifest.json").write_text(json.dumps(manifest))


def m4(tmp: Path, tally: Tally) -> None:
    from meteora_edge import HashingEncoder
    from meteora_edge.index.local_index import LocalIndex

    edits = [lambda m: m["chunking"].update(chunk_size=2, overlap=0), lambda m: m.update(created="soon"),
             lambda m: m.update(updated="1999-01-01T00:00:00+00:00"),
             lambda m: m["last_write"].update(chunks=m["count"] + 1)]
    for n, edit in enumerate(edits):
        root = tmp / f"m4-{n}"
        index = LocalIndex.build(root, _docs(), HashingEncoder(), chunk_size=8, overlap=0)
        _rehash(root / index.generation, edit)
        tally["trials"] += 1
        _guard(tally, lambda: LocalIndex.load(root), expect_error=True)


def m1(tmp: Path, tally: Tally) -> None:
    from meteora_edge import HashingEncoder
    from meteora_edge.index.local_index import LocalIndex

    docs = tmp / "m1-docs"
    docs.mkdir()
    for i in range(9):
        (docs / f"{i}.txt").write_text(" ".join(f"w{i}x{j}" for j in range(30)))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "HF_HUB_OFFLINE": "1"}
    for trial in range(2):
        root = tmp / f"m1-{trial}"
        LocalIndex.build(root, _docs(1), HashingEncoder())  # what the CLI uses without --bundle
        procs = [subprocess.Popen([sys.executable, "-m", "meteora_edge", "index", "add", str(root), str(docs)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
        outs = [p.communicate(timeout=120) for p in procs]
        tally["trials"] += 3
        tally["tracebacks"] += sum("Traceback" in err for _, err in outs)
        reported = [int(err.split("added ")[1].split()[0]) for _, err in outs if "added " in err]
        index = LocalIndex.load(root)
        texts = [r["text"] for r in index.records(range(len(index)))]
        tally["duplicated"] += len(texts) - len(set(texts))
        tally["lost"] += 1 + 9 - len(set(texts))  # the base chunk and one chunk per file
        tally["failed"] += (len(reported) != 3) + (sum(reported) != len(index) - 1) + (sum(r > 0 for r in reported) != 1)


def r4_readers(tmp: Path, tally: Tally) -> None:
    """Issue 48 item 4 and 8's reading findings: a bad JSON Lines line loses only itself, a BOM never
    reaches the text, UTF-16 without a BOM reads as words, a .gz is never told to convert to UTF-8,
    and damaged files of every kind are one reason each."""
    import codecs
    import gzip

    from meteora_edge.index.corpus import read_documents

    folder = tmp / "r4"
    folder.mkdir()
    (folder / "faq.jsonl").write_text('{"text": "one"}\n{"text": \n{"text": "two"}\n')
    (folder / "bom.md").write_bytes(codecs.BOM_UTF8 + b"bom clause")
    (folder / "wide.txt").write_bytes("wide clause".encode("utf-16-le"))
    (folder / "wide-be.txt").write_bytes("big clause".encode("utf-16-be"))
    (folder / "latin.txt").write_bytes("caf\xe9 clause".encode("latin-1"))
    damaged = {"bad.gz": b"\x1f\x8bnot gzip", "bad.pdf": b"%PDF-1.4 broken", "bad.docx": b"PK\x03\x04broken",
               "bad.html": b"<html>\xff\xfe\x00<p>", "tar.gz": gzip.compress(b"\x00" * 512)}
    for name, data in damaged.items():
        (folder / name).write_bytes(data)
    seen: dict[str, str] = {}
    tally["trials"] += 5 + len(damaged)
    docs = _guard(tally, lambda: read_documents([folder], on_skip=lambda p, r: seen.setdefault(p.name, r)),
                  expect_error=False)
    texts = [d.text for d in docs] if isinstance(docs, list) else []
    tally["lost"] += sum(1 for t in ("one", "two", "bom clause", "wide clause", "big clause", "caf\u00e9 clause")
                         if t not in texts)
    tally["failed"] += sum(1 for t in texts if "\ufeff" in t or "\x00" in t)
    tally["failed"] += sum(1 for name in damaged if name not in seen or "UTF-8" in seen[name])


def main() -> int:
    import meteora_edge  # noqa: F401 - fail early if the package is not importable

    items = {"D2 gen-* folders": d2, "D5 U+2028 in JSONL": d5, "S2/M3 links, FIFOs": s2_m3, "T2 1000 levels": t2,
             "H1 FIFO index files": h1, "T4 forged ANN ids": t4, "M4 manifest fields": m4,
             "M1 3 concurrent adds": m1, "R4 readers (48.4, 48.8)": r4_readers}
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, item in items.items():
            tally = Tally()
            work = Path(folder) / name.split()[0].replace("/", "-")
            work.mkdir()
            item(work, tally)
            rows[name] = tally
    print(f"{'item':<24}" + "".join(f"{c:>12}" for c in COLUMNS))
    for name, tally in rows.items():
        print(f"{name:<24}" + "".join(f"{tally[c]:>12}" for c in COLUMNS))
    bad = sum(t[c] for t in rows.values() for c in COLUMNS if c != "trials")
    print(f"{'total':<24}" + "".join(f"{sum(t[c] for t in rows.values()):>12}" for c in COLUMNS))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
