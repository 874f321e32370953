"""LocalIndex: opening a version (what a damaged array's error names), reading records by id, and
add: batching, the encoder check under the lock, duplicates, and copying the previous version's
chunks (byte for byte from format 2, rewritten record by record from format 1)."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import InputError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.index.manifest import REQUIRED_FILES
# three one-sentence documents; the live generation folder; recompute its hashes as a consistent tamperer would
from test_index_manifest import DOCS, _generation, _rewrite as _rehash


def _words(n: int, prefix: str = "w") -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


# ------------------------------------------------------------------ opening a version
def test_an_opened_version_exposes_its_generation_arrays_and_manifest(tmp_path):
    """load gives the root, the generation the pointer names, memory-mapped float32 vectors and int64 offsets."""
    built = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=5, overlap=1)
    index = LocalIndex.load(tmp_path / "ix")
    assert index.root == tmp_path / "ix" and index.generation == built.generation
    assert _generation(tmp_path / "ix").name == index.generation
    assert isinstance(index.vectors, np.memmap) and index.vectors.dtype == np.float32
    assert index.vectors.shape == (len(index), 384) and index.manifest["count"] == len(index)
    assert index.offsets.dtype == np.int64 and index.offsets[0] == 0 and index.offsets.shape == (len(index),)
    assert not isinstance(index.offsets, np.memmap)  # the small offsets array is read into memory
    assert index.ann is None and index.encoder_id == "hashing:384" and index.bm25.n_docs == len(index)


@pytest.mark.parametrize(("name", "array", "held", "expected"), [
    ("vectors.npy", lambda a: a.astype(np.float64), "float64 (3, 384)", "float32 (3, 384)"),
    ("vectors.npy", lambda a: a[:-1], "float32 (2, 384)", "float32 (3, 384)"),
    ("chunk_offsets.npy", lambda a: a.astype(np.int32), "int32 (3,)", "int64 (3,)"),
    ("chunk_offsets.npy", lambda a: a.reshape(3, 1), "int64 (3, 1)", "int64 (3,)"),
])
def test_an_array_of_the_wrong_dtype_or_shape_is_refused_naming_its_file(tmp_path, name, array, held, expected):
    """A vectors or offsets file of another dtype or shape (hashes recomputed) is refused; the
    message names the file inside its generation folder, what it holds and what was expected."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    np.save(gen / name, array(np.load(gen / name)))
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    assert str(err.value) == f"{gen / name} holds {held}, expected {expected}; rebuild the index"


@pytest.mark.parametrize("name", ["vectors.npy", "chunk_offsets.npy"])
def test_an_array_file_that_is_not_npy_is_refused_naming_its_file(tmp_path, name):
    """Garbage where an array should be: refused, naming the file."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    (gen / name).write_bytes(b"not an array at all")
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    assert str(err.value).startswith(f"{gen / name} is not a readable array (")
    assert str(err.value).endswith("); rebuild the index")


@pytest.mark.parametrize("offsets", [[5, 10, 20], [0, 0, 20], [0, 20, 10], [0, 10, 10**6], [0, 10, "size"]])
def test_offsets_that_do_not_fit_the_chunk_file_are_refused(tmp_path, offsets):
    """Offsets must start at 0, increase, and start each record inside chunks.jsonl (not at its end)."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    size = (gen / "chunks.jsonl").stat().st_size
    np.save(gen / "chunk_offsets.npy", np.asarray([size if o == "size" else o for o in offsets], dtype=np.int64))
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    assert str(err.value) == f"chunk offsets in {gen} do not fit chunks.jsonl; rebuild the index"


def test_a_chunk_file_not_ending_in_a_newline_is_refused(tmp_path):
    """The last record must end the chunk file with a newline."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    (gen / "chunks.jsonl").write_bytes((gen / "chunks.jsonl").read_bytes()[:-1] + b" ")
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    assert str(err.value) == f"chunk offsets in {gen} do not fit chunks.jsonl; rebuild the index"


@pytest.mark.parametrize(("name", "dtype"), [("bm25_term_ptr.npy", "int64"), ("bm25_doc_ids.npy", "int32"),
                                             ("bm25_tf.npy", "int32"), ("bm25_doc_len.npy", "int32")])
def test_a_bm25_array_of_another_dtype_is_refused_naming_its_file(tmp_path, name, dtype):
    """Each BM25 array is checked like the others, its own file named in the message."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    np.save(gen / name, np.load(gen / name).astype(np.float64))
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    n = np.load(gen / name).shape[0]
    assert str(err.value) == f"{gen / name} holds float64 ({n},), expected {dtype} (n,); rebuild the index"


def test_a_bm25_vocabulary_that_is_not_json_is_refused_naming_its_file(tmp_path):
    """A damaged vocabulary is refused, naming the file and the parser's reason."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    (gen / "bm25_vocab.json").write_bytes(b"{not json")
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    reason = "Expecting property name enclosed in double quotes"
    assert str(err.value) == f"{gen / 'bm25_vocab.json'} is corrupt ({reason}); rebuild the index"


def test_bm25_arrays_inconsistent_with_each_other_are_refused_naming_the_generation(tmp_path):
    """Postings naming documents the index does not have are refused; the message names the generation."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    np.save(gen / "bm25_doc_ids.npy", np.load(gen / "bm25_doc_ids.npy") + 1000)
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    assert str(err.value) == f"BM25 files in {gen} are inconsistent with each other; rebuild the index"


def test_bm25_covering_another_number_of_chunks_is_refused(tmp_path):
    """BM25 files of another index (consistent among themselves) do not fit this one's vectors."""
    root, other = tmp_path / "ix", tmp_path / "other"
    LocalIndex.build(root, DOCS, HashingEncoder())
    LocalIndex.build(other, DOCS[:2], HashingEncoder())
    gen = _generation(root)
    for name in [n for n in REQUIRED_FILES if n.startswith("bm25_")]:
        shutil.copyfile(_generation(other) / name, gen / name)
    _rehash(gen)
    with pytest.raises(LocalIndexError) as err:
        LocalIndex.load(root)
    assert str(err.value) == f"index {gen}: BM25 covers 2 chunks, vectors 3; rebuild it"


def test_a_bm25_vocabulary_over_a_megabyte_loads(tmp_path):
    """The vocabulary is not held to the manifest's size limit: a large corpus has a large one."""
    words = " ".join(f"{i:07d}" + "x" * 33 for i in range(27000))
    index = LocalIndex.build(tmp_path / "ix", [SourceDocument("a", words, {})], HashingEncoder(), chunk_size=4096)
    assert (tmp_path / "ix" / index.generation / "bm25_vocab.json").stat().st_size > 1 << 20
    assert len(LocalIndex.load(tmp_path / "ix").bm25.vocab) == 27000


# ------------------------------------------------------------------ records
def test_records_come_in_the_order_asked_and_out_of_range_ids_are_refused(tmp_path):
    """records(ids) returns each id's record in the given order (repeats allowed, numpy ints too);
    an id outside 0..n-1 is an InputError naming the id and the range."""
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    records = index.records([2, 0, np.int64(2)])
    assert [r["id"] for r in records] == [2, 0, 2]
    assert [r["source"] for r in records] == ["c", "a", "c"]
    assert records[1]["text"] == DOCS[0].text and records[1]["position"] == 0
    assert index.records([]) == []
    for bad in (3, -1, 10**9):
        with pytest.raises(InputError) as err:
            index.records([0, bad])
        assert str(err.value) == f"chunk id {bad} is outside the index (0..2)"


def test_a_record_that_is_not_json_is_reported(tmp_path):
    """A chunk line that is not a JSON object with the right id and text is reported, not returned."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    gen = _generation(root)
    lines = (gen / "chunks.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = b"x" * (len(lines[1]) - 1) + b"\n"
    (gen / "chunks.jsonl").write_bytes(b"".join(lines))
    _rehash(gen)
    index = LocalIndex.load(root)
    assert index.records([0, 2])[1]["source"] == "c"
    with pytest.raises(LocalIndexError) as err:
        index.records([1])
    assert str(err.value) == f"chunk record 1 of {root} is not where its offset says; rebuild the index"


def _replace_line(gen: Path, i: int, line: bytes) -> None:
    """Replace chunk line i (offsets and hashes recomputed, so only the record itself is wrong)."""
    lines = (gen / "chunks.jsonl").read_bytes().splitlines(keepends=True)
    lines[i] = line
    (gen / "chunks.jsonl").write_bytes(b"".join(lines))
    np.save(gen / "chunk_offsets.npy", np.cumsum([0] + [len(x) for x in lines[:-1]]).astype(np.int64))
    _rehash(gen)


@pytest.mark.parametrize("line", [
    b'{"id": 2, "text": "x"}\n',
    b'{"id": "1", "text": "x"}\n',
    b'{"id": 1, "text": 5}\n',
    b'{"id": 1}\n',
    b'[1, "x"]\n',
    b'"text"\n',
])
def test_a_record_with_the_wrong_id_or_no_text_is_reported(tmp_path, line):
    """A JSON line that is not an object with this id and a string text is not returned."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    _replace_line(_generation(root), 1, line)
    index = LocalIndex.load(root)
    assert [r["id"] for r in index.records([0, 2])] == [0, 2]
    with pytest.raises(LocalIndexError) as err:
        index.records([1])
    assert str(err.value) == f"chunk record 1 of {root} is not where its offset says; rebuild the index"


def test_the_last_record_runs_to_the_end_of_the_chunk_file(tmp_path):
    """The last record is read up to the end of chunks.jsonl, every other one up to the next offset."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS, HashingEncoder())
    _replace_line(_generation(root), 2, b'{"id": 2, "text": "last", "extra": "kept"}\n')
    index = LocalIndex.load(root)
    assert index.records([2]) == [{"id": 2, "text": "last", "extra": "kept"}]
    assert index.records([1])[0]["text"] == DOCS[1].text


# ------------------------------------------------------------------ add
def test_add_embeds_64_chunks_per_batch_by_default(tmp_path):
    """Progress is reported after each batch of new chunks: 64 by default, batch_size when given."""
    enc = HashingEncoder()
    index = LocalIndex.build(tmp_path / "ix", [SourceDocument("a", "alpha", {})], enc, chunk_size=1, overlap=0)
    calls = []
    grown = index.add([SourceDocument("b", _words(70), {})], enc, progress=lambda *c: calls.append(c))
    assert calls == [(64, 70), (70, 70)]
    assert len(grown) == 71
    calls.clear()
    grown.add([SourceDocument("c", _words(70, "v"), {})], enc, batch_size=32, progress=lambda *c: calls.append(c))
    assert calls == [(32, 70), (64, 70), (70, 70)]


def test_add_appends_to_the_current_version_with_the_next_ids(tmp_path):
    """A stale handle's add appends to the version current under the lock; ids continue; the
    manifest keeps the encoder, chunking and creation date and records the add."""
    enc = HashingEncoder()
    first = LocalIndex.build(tmp_path / "ix", DOCS[:1], enc, chunk_size=5, overlap=1)
    second = first.add(DOCS[1:2], enc)
    third = first.add(DOCS[2:], enc)  # first is stale: the add lands after second's chunks
    records = third.records(range(len(third)))
    assert [r["id"] for r in records] == list(range(len(third)))
    assert len(third) > len(second) > len(first)
    assert [r["source"] for r in records[len(second):]] == ["c"] * (len(third) - len(second))
    for key in ("format", "encoder", "chunking", "created"):
        assert third.manifest[key] == first.manifest[key]
    assert third.manifest["format_version"] == 3
    assert third.manifest["last_write"] == {"op": "add", "chunks": len(third) - len(second)}
    assert third.manifest["count"] == len(third)
    np.testing.assert_array_equal(np.asarray(third.vectors[: len(second)]), np.asarray(second.vectors))
    alone = LocalIndex.build(tmp_path / "alone", DOCS[2:], enc, chunk_size=5, overlap=1)  # the index's chunking
    assert [r["text"] for r in records[len(second):]] == [r["text"] for r in alone.records(range(len(alone)))]
    assert [r["position"] for r in records[len(second):]] == list(range(len(alone)))


def test_add_links_the_base_files_and_writes_only_the_delta(tmp_path):
    """An add keeps the base segment's files (hard links, unchanged bytes) and writes the new chunks,
    numbered after them, to the delta segment; a second add appends to that delta."""
    enc = HashingEncoder()
    first = LocalIndex.build(tmp_path / "ix", DOCS[:2], enc, chunk_size=5, overlap=1)
    old = {name: (tmp_path / "ix" / first.generation / name).read_bytes() for name in REQUIRED_FILES}
    grown = first.add(DOCS[2:3], enc)
    gen = tmp_path / "ix" / grown.generation
    assert {name: (gen / name).read_bytes() for name in REQUIRED_FILES} == old
    delta = [json.loads(line) for line in (gen / "delta_chunks.jsonl").read_bytes().splitlines()]
    assert [r["id"] for r in delta] == list(range(len(first), len(grown))) and {r["source"] for r in delta} == {"c"}
    again = grown.add([SourceDocument("e", "Late payments accrue interest.", {})], enc)
    assert [r["source"] for r in again.records(range(len(again)))][len(first):] == ["c"] * len(delta) + ["e"]
    assert again.manifest["segments"] == {"base": len(first), "delta": len(again) - len(first), "deleted": 0}


def test_documents_already_indexed_are_left_out_unless_duplicates_are_allowed(tmp_path):
    """Adding what the index holds writes nothing and returns the current version; with
    allow_duplicates the chunks are added again."""
    enc = HashingEncoder()
    index = LocalIndex.build(tmp_path / "ix", DOCS, enc)
    same = index.add(DOCS[:2], enc)
    assert same.generation == index.generation and len(same) == len(index)
    doubled = index.add(DOCS[:2], enc, allow_duplicates=True)
    assert doubled.generation != index.generation and len(doubled) == len(index) + 2
    assert [r["source"] for r in doubled.records([3, 4])] == ["a", "b"]


def test_documents_without_text_are_refused(tmp_path):
    """No documents (when duplicates are allowed) or a document without words is an InputError,
    and the index is unchanged; without allow_duplicates no documents means nothing to do."""
    enc = HashingEncoder()
    index = LocalIndex.build(tmp_path / "ix", DOCS, enc)
    with pytest.raises(InputError, match="^the documents hold no text to add$"):
        index.add([], enc, allow_duplicates=True)
    with pytest.raises(InputError, match="^text holds no words; nothing to chunk$"):
        index.add([SourceDocument("e", "   ", {})], enc, allow_duplicates=True)
    assert index.add([], enc).generation == index.generation
    assert LocalIndex.load(tmp_path / "ix").generation == index.generation


def test_add_checks_the_encoder_of_the_version_it_appends_to(tmp_path):
    """If the index was rebuilt with another encoder since this handle was opened, add refuses
    (the current version's encoder is checked under the lock) and writes nothing."""
    root = tmp_path / "ix"
    stale = LocalIndex.build(root, DOCS[:1], HashingEncoder())
    rebuilt = LocalIndex.build(root, DOCS[:1], HashingEncoder(n_features=128), overwrite=True)
    with pytest.raises(LocalIndexError) as err:
        stale.add(DOCS[1:], HashingEncoder())
    assert str(err.value) == (f"index {root} was built with encoder 'hashing:128', not 'hashing:384'; "
                              "use the same --bundle or rebuild the index")
    assert LocalIndex.load(root).generation == rebuilt.generation


def test_add_refuses_another_encoder_before_taking_the_lock(tmp_path):
    """The handle's own encoder is checked first."""
    index = LocalIndex.build(tmp_path / "ix", DOCS[:1], HashingEncoder())
    with pytest.raises(LocalIndexError, match="built with encoder 'hashing:384', not 'hashing:64'"):
        index.add(DOCS[1:], HashingEncoder(n_features=64))


def test_add_to_an_index_removed_meanwhile_does_not_recreate_it(tmp_path):
    """When the index folder was deleted after it was opened, add fails and leaves no folder behind."""
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], HashingEncoder())
    shutil.rmtree(root)
    with pytest.raises(LocalIndexError) as err:
        index.add(DOCS[1:], HashingEncoder())
    assert str(err.value) == f"index folder not found: {root}; build one with 'meteora-edge index build'"
    assert not root.exists()


# ------------------------------------------------------------------ add to a format-1 index
def _as_format1(root: Path) -> None:
    """Turn a freshly built index into the format-1 layout meteora-edge 0.1.0 wrote: every file at
    the top, the whole manifest in manifest.json, and records without the sha256 of their text."""
    gen = _generation(root)
    manifest = json.loads((gen / "manifest.json").read_text())
    lines = [json.loads(line) for line in (gen / "chunks.jsonl").read_bytes().splitlines()]
    raw = [json.dumps({k: v for k, v in r.items() if k != "sha256"}).encode() + b"\n" for r in lines]
    (root / "chunks.jsonl").write_bytes(b"".join(raw))
    np.save(root / "chunk_offsets.npy", np.cumsum([0] + [len(line) for line in raw[:-1]]).astype(np.int64))
    for name in REQUIRED_FILES:
        if name not in ("chunks.jsonl", "chunk_offsets.npy"):
            shutil.move(gen / name, root / name)
    shutil.rmtree(gen)
    files = {}
    for name in REQUIRED_FILES:
        data = (root / name).read_bytes()
        files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    keep = ("format", "encoder", "chunking", "count", "created", "updated")
    (root / "manifest.json").write_text(json.dumps({**{k: manifest[k] for k in keep}, "format_version": 1,
                                                    "files": files}))


def test_add_to_a_large_format1_index_rewrites_every_record_once(tmp_path):
    """Past 4096 chunks (read in blocks of 4096) every format-1 record is rewritten exactly once,
    in order, with the sha256 of its text, and the new chunks follow."""
    root = tmp_path / "ix"
    enc = HashingEncoder()
    LocalIndex.build(root, [SourceDocument("a", _words(4100), {})], enc, chunk_size=1, overlap=0)
    _as_format1(root)
    old = LocalIndex.load(root, encoder=enc)
    assert old.generation is None and old.manifest["format_version"] == 1 and len(old) == 4100
    grown = old.add([SourceDocument("b", "omega", {})], enc)
    assert grown.manifest["format_version"] == 3 and len(grown) == 4101
    assert grown.generation.startswith("gen-000001-")  # a format-1 index has no generation to follow
    records = grown.records(range(len(grown)))
    assert [r["id"] for r in records] == list(range(4101))
    assert [r["text"] for r in records] == [f"w{i}" for i in range(4100)] + ["omega"]
    assert all(r["sha256"] == hashlib.sha256(r["text"].encode()).hexdigest() for r in records)
    assert grown.offsets.dtype == np.int64
    lines = (root / grown.generation / "chunks.jsonl").read_bytes().splitlines(keepends=True)
    assert np.asarray(grown.offsets).tolist() == np.cumsum([0] + [len(x) for x in lines[:-1]]).tolist()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
def test_an_index_no_longer_used_closes_its_files(tmp_path):
    """Dropping an opened index releases its descriptors (its chunk file included)."""
    import gc

    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    index = LocalIndex.load(tmp_path / "ix")
    assert index.records([0])[0]["id"] == 0 and len(os.listdir("/proc/self/fd")) > before
    del index
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before
