import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.index.corpus import SourceDocument, read_documents
from meteora_edge.errors import InputError, LocalIndexError
from meteora_edge.index.local_index import LocalIndex

DOCS = [
    SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {}),
    SourceDocument("b", "Fees are payable monthly within thirty days of the invoice.", {}),
    SourceDocument("c", "The agreement is governed by the laws of England and Wales.", {}),
]


def test_build_load_search_and_records(tmp_path):
    enc = HashingEncoder()
    built = LocalIndex.build(tmp_path / "ix", DOCS, enc, chunk_size=5, overlap=1)
    loaded = LocalIndex.load(tmp_path / "ix", encoder=enc)
    assert len(loaded) == len(built) > 3
    assert isinstance(loaded.vectors, np.memmap)
    ids, scores = loaded.search(enc.encode(["terminate the agreement"])[0], 2)
    assert loaded.records(ids.tolist())[0]["source"] == "a"
    assert list(scores) == sorted(scores, reverse=True)
    rec = loaded.records([0])[0]
    assert DOCS[0].text[rec["start"] : rec["end"]] == rec["text"]
    assert loaded.bm25_search("invoice", 3)[0].size >= 1


def test_add_appends_and_keeps_ids(tmp_path):
    enc = HashingEncoder()
    first = LocalIndex.build(tmp_path / "ix", DOCS[:2], enc)
    grown = first.add(DOCS[2:], enc)
    assert len(grown) == len(first) + 1
    assert grown.records([len(grown) - 1])[0]["source"] == "c"
    assert grown.bm25.n_docs == len(grown)
    assert grown.manifest["last_write"] == {"op": "add", "chunks": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["ix"]  # no leftovers beside the index
    inside = sorted(p.name for p in (tmp_path / "ix").iterdir())
    assert inside == [".writer.lock", grown.generation, "manifest.json"]  # the superseded generation is gone


def test_records_carry_the_sha256_of_their_text(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=4, overlap=0)
    for record in index.records(range(len(index))):
        assert record["sha256"] == hashlib.sha256(record["text"].encode("utf-8")).hexdigest()


def test_refuses_another_encoder(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    with pytest.raises(LocalIndexError, match="built with encoder 'hashing:384'"):
        LocalIndex.load(tmp_path / "ix", encoder=HashingEncoder(n_features=128))
    with pytest.raises(LocalIndexError, match="built with encoder 'hashing:384'"):
        LocalIndex.load(tmp_path / "ix").add(DOCS, HashingEncoder(n_features=128))


def _generation(root):
    return root / json.loads((root / "manifest.json").read_text())["generation"]


@pytest.mark.parametrize("damage", ["truncate-vectors", "flip-vector-byte", "flip-chunk-byte", "drop-pointer",
                                    "newer-format", "missing-bm25", "missing-generation"])
def test_damaged_index_is_refused(tmp_path, damage):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    root = tmp_path / "ix"
    gen = _generation(root)
    if damage == "truncate-vectors":
        data = (gen / "vectors.npy").read_bytes()
        (gen / "vectors.npy").write_bytes(data[: len(data) // 2])
    elif damage in ("flip-vector-byte", "flip-chunk-byte"):
        name = "vectors.npy" if damage == "flip-vector-byte" else "chunks.jsonl"
        data = bytearray((gen / name).read_bytes())
        data[-10] ^= 0x01
        (gen / name).write_bytes(bytes(data))
    elif damage == "drop-pointer":
        (root / "manifest.json").unlink()
    elif damage == "newer-format":
        pointer = json.loads((root / "manifest.json").read_text())
        pointer["format_version"] = 99
        (root / "manifest.json").write_text(json.dumps(pointer))
    elif damage == "missing-bm25":
        (gen / "bm25_tf.npy").unlink()
    else:
        shutil.rmtree(gen)
    with pytest.raises(LocalIndexError):
        LocalIndex.load(root)


def test_existing_target_and_empty_inputs(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    with pytest.raises(InputError, match="already exists"):
        LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    with pytest.raises(InputError, match="no text"):
        LocalIndex.build(tmp_path / "empty", [], HashingEncoder())
    assert not (tmp_path / "empty").exists()
    with pytest.raises(LocalIndexError, match="not found"):
        LocalIndex.load(tmp_path / "nothing")
    (tmp_path / "made-by-hand").mkdir()
    assert len(LocalIndex.build(tmp_path / "made-by-hand", DOCS, HashingEncoder())) == 3  # an empty folder is free


def _tree(root):
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("victim", ["documents-folder", "home-folder", "a-file", "foreign-manifest", "manifest-folder"])
@pytest.mark.parametrize("overwrite", [True, False])
def test_build_refuses_to_replace_anything_but_an_index(tmp_path, victim, overwrite):
    target = tmp_path / "target"
    if victim == "a-file":
        target.write_text("my thesis")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("keep me")
        if victim == "home-folder":
            (target / ".bashrc").write_text("export X=1")
            (target / "Documents").mkdir()
            (target / "Documents" / "cv.md").write_text("# CV")
        elif victim == "foreign-manifest":
            (target / "manifest.json").write_text('{"name": "some other tool"}')
        elif victim == "manifest-folder":
            (target / "manifest.json").mkdir()
    before = _tree(tmp_path)
    with pytest.raises(InputError, match="refusing to touch it"):
        LocalIndex.build(target, DOCS, HashingEncoder(), overwrite=overwrite)
    assert _tree(tmp_path) == before


def test_overwrite_replaces_an_index_and_keeps_foreign_files_in_it(tmp_path):
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS[:1], HashingEncoder())
    (root / "README.txt").write_text("my note about this index")
    rebuilt = LocalIndex.build(root, DOCS[1:], HashingEncoder(), overwrite=True)
    assert {r["source"] for r in rebuilt.records(range(len(rebuilt)))} == {"b", "c"}
    assert (root / "README.txt").read_text() == "my note about this index"
    assert sorted(p.name for p in root.iterdir()) == [".writer.lock", "README.txt", rebuilt.generation, "manifest.json"]


def test_an_open_index_keeps_reading_its_version_while_writers_replace_it(tmp_path):
    enc = HashingEncoder()
    root = tmp_path / "ix"
    old = LocalIndex.build(root, DOCS, enc)
    old_text = old.records([0])[0]["text"]
    for round_ in range(3):  # the old generation is removed by the first of these writes
        LocalIndex.build(root, [SourceDocument(f"new{round_}", f"round {round_} replaced everything", {})], enc,
                         overwrite=True)
        LocalIndex.load(root).add([SourceDocument(f"more{round_}", "an appended chunk", {})], enc)
    assert not (root / old.generation).exists()
    assert old.records([0])[0]["text"] == old_text and len(old) == 3
    ids, _ = old.search(enc.encode(["terminate agreement"])[0], 1)
    assert old.records(ids.tolist())[0]["source"] == "a"
    assert old.bm25_search("ninety", 1)[0].tolist() == [0]
    fresh = LocalIndex.load(root)
    assert [r["source"] for r in fresh.records(range(len(fresh)))] == ["new2", "more2"]


class _SlowEncoder(HashingEncoder):
    """Takes a while per batch, so two writers surely overlap."""

    def encode(self, texts):
        time.sleep(0.3)
        return super().encode(texts)


def test_two_writers_in_threads_take_turns_and_lose_nothing(tmp_path):
    enc = _SlowEncoder()
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS[:1], enc)
    stale = LocalIndex.load(root)  # both writers start from the same, soon stale, version
    batches = [[SourceDocument(f"t{t}-{i}", f"thread {t} document {i} text", {}) for i in range(3)] for t in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda docs: stale.add(docs, enc), batches))
    final = LocalIndex.load(root, encoder=enc)
    records = final.records(range(len(final)))
    assert sorted(r["source"] for r in records) == sorted(["a"] + [d.source_id for b in batches for d in b])
    assert [r["id"] for r in records] == list(range(len(final)))


def test_leftovers_of_killed_writers_go_with_the_next_write(tmp_path):
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], HashingEncoder())
    (root / "gen-000099-0123abcd").mkdir()  # a generation a killed writer never published
    (root / "gen-000099-0123abcd" / "vectors.npy").write_bytes(b"half")
    (root / ".manifest.json.x1y2.tmp").write_text("{")
    assert len(LocalIndex.load(root)) == 1  # readers ignore them
    grown = index.add(DOCS[1:], HashingEncoder())
    assert sorted(p.name for p in root.iterdir()) == [".writer.lock", grown.generation, "manifest.json"]


def test_a_killed_first_build_leaves_a_folder_that_a_new_build_may_use(tmp_path):
    root = tmp_path / "ix"
    root.mkdir()
    (root / ".writer.lock").touch()
    (root / "gen-000001-0123abcd").mkdir()
    with pytest.raises(LocalIndexError, match="holds no index"):
        LocalIndex.load(root)
    built = LocalIndex.build(root, DOCS, HashingEncoder())
    assert sorted(p.name for p in root.iterdir()) == [".writer.lock", built.generation, "manifest.json"]


def test_interrupted_build_leaves_no_index_that_loads(tmp_path):
    script = textwrap.dedent(
        f"""
        import os, signal
        from meteora_edge import HashingEncoder
        from meteora_edge.index.corpus import SourceDocument
        from meteora_edge.index.local_index import LocalIndex
        docs = [SourceDocument(str(i), "word " * 50, {{}}) for i in range(200)]
        def progress(done, total):
            if done >= 64:
                os.kill(os.getpid(), signal.SIGKILL)  # die mid-build, no cleanup at all
        LocalIndex.build({str(tmp_path / 'ix')!r}, docs, HashingEncoder(), batch_size=32, progress=progress)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "ix").exists()  # embedding comes before anything is written


@pytest.mark.parametrize("metadata, message", [
    ({"score": float("nan")}, "NaN or Infinity"),
    ({"limits": [1.0, float("inf")]}, "NaN or Infinity"),
    ({"note": "bad \ud800 half"}, "lone surrogate"),
    ({"when": object()}, "is not JSON"),
])
def test_metadata_json_cannot_store_is_refused_before_anything_is_written(tmp_path, metadata, message):
    docs = [DOCS[0], SourceDocument("odd", "some text", metadata)]
    with pytest.raises(InputError, match=message):
        LocalIndex.build(tmp_path / "ix", docs, HashingEncoder())
    assert not (tmp_path / "ix").exists()
    index = LocalIndex.build(tmp_path / "ok", DOCS[:1], HashingEncoder())
    with pytest.raises(InputError, match=message):
        index.add(docs, HashingEncoder())
    assert len(LocalIndex.load(tmp_path / "ok")) == 1


def test_non_utf8_file_name_is_indexed_under_an_escaped_name(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / os.fsdecode(b"caf\xe9.txt")).write_text("Notice periods are ninety days.")
    docs = read_documents([folder])
    assert docs[0].source_id == f"{folder}/caf\\xe9.txt"
    index = LocalIndex.build(tmp_path / "ix", docs, HashingEncoder())
    assert index.records([0])[0]["source"].endswith("caf\\xe9.txt")


def test_read_documents_shapes(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\nBody text.")
    (tmp_path / "b.jsonl").write_text('{"id": "x1", "text": "first", "title": "T"}\n{"content": "second"}\n')
    (tmp_path / "c.json").write_text(json.dumps({"documents": ["third", {"page_content": "fourth"}]}))
    (tmp_path / "skip.bin").write_bytes(b"\x00\x01")
    docs = read_documents([tmp_path])
    assert [d.text for d in docs] == ["# Title\n\nBody text.", "first", "second", "third", "fourth"]
    assert docs[1].source_id == "x1" and docs[1].metadata["title"] == "T"
    with pytest.raises(InputError, match="file not found"):
        read_documents([tmp_path / "nope.txt"])
    (tmp_path / "bad.json").write_text("[1,")
    with pytest.raises(InputError, match="not valid JSON"):
        read_documents([tmp_path / "bad.json"])


def test_a_new_index_folder_is_owner_only_and_a_shared_one_stays_shared(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert (tmp_path / "ix").stat().st_mode & 0o777 == 0o700  # other local users cannot read the documents
    # the folder is the gate: a user who opens it up (chmod) finds the files readable, and a rebuild keeps it open
    (tmp_path / "ix").chmod(0o755)
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), overwrite=True)
    assert (tmp_path / "ix").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "ix" / "manifest.json").stat().st_mode & 0o044 == 0o044 & ~_umask()


def _umask() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    return 0o022


def test_json_document_files_in_every_layout(tmp_path):
    (tmp_path / "one.json").write_text('{"text": "a single document", "id": "solo"}')
    (tmp_path / "chunks.json").write_text('{"chunks": ["from chunks"]}')
    (tmp_path / "bad.json").write_text('{"documents": "not a list"}')
    docs = read_documents([tmp_path / "one.json", tmp_path / "chunks.json"])
    assert [(d.source_id, d.text) for d in docs] == [("solo", "a single document"), (f"{tmp_path / 'chunks.json'}#0", "from chunks")]
    with pytest.raises(InputError, match="'documents' must be a list"):
        read_documents([tmp_path / "bad.json"])
