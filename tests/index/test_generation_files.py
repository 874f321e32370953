"""The index's files on disk: what is fsynced and in which order, the exact JSON bytes, generation
names, which leftovers a writer removes, and which folders may receive a new index."""

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import InputError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.generations import GENERATION_MARKER, GenerationWriter, target_state
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.index.manifest import REQUIRED_FILES
from meteora_edge.models.bm25 import BM25_ARRAYS

DOCS = [
    SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {}),
    SourceDocument("b", "Fees are payable monthly within thirty days of the invoice.", {}),
]
GENERATION_FILES = ["vectors.npy", "chunks.jsonl", "chunk_offsets.npy", *(n for n, _ in BM25_ARRAYS),
                    "bm25_vocab.json", "sources.json", "manifest.json"]
#: What an add writes: the delta segment and the source table (the base files are hard-linked, already durable).
DELTA_WRITES = ["delta_vectors.npy", "delta_chunks.jsonl", "delta_chunk_offsets.npy",
                *(f"delta_{n}" for n, _ in BM25_ARRAYS), "delta_bm25_vocab.json", "sources.json", "manifest.json"]
REFUSE = "refusing to touch it; choose another --out"


def _pointer(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


# ------------------------------------------------------------------ durability: what is fsynced
@pytest.fixture
def fsyncs(monkeypatch, tmp_path):
    """Spy (not replace) os.fsync and os.open: record the path behind every fsynced descriptor
    under tmp_path, and the flags each fsynced folder was opened with."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to name a descriptor's file")
    synced: list[str] = []
    folder_flags: list[int] = []
    opened: dict[int, int] = {}
    real_fsync, real_open = os.fsync, os.open

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(str(tmp_path)):
            synced.append(os.path.relpath(path, tmp_path))
            if os.path.isdir(path):
                folder_flags.append(opened[fd])
        return real_fsync(fd)

    def open_(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        opened[fd] = flags
        return fd

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "open", open_)
    return synced, folder_flags


def _pointer_tmp(name: str) -> bool:
    return bool(re.fullmatch(r"ix/\.manifest\.json\.\w+\.tmp", name))


def _replaced_after(monkeypatch, synced):
    """Spy os.replace: how many fsyncs had returned when the pointer was replaced."""
    at: list[int] = []
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        at.append(len(synced))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return at


def test_build_fsyncs_every_file_and_folder_before_the_pointer_moves(tmp_path, fsyncs, monkeypatch):
    """A first build fsyncs: the parent of the new folder, the generation's marker, then (together, in any order)
    each generation file, the generation folder, the index folder and the temporary pointer; only then is the
    pointer replaced, and the index folder fsynced after the switch. Every folder is opened read-only as a directory."""
    synced, folder_flags = fsyncs
    replaced = _replaced_after(monkeypatch, synced)
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    gen = f"ix/{index.generation}"
    assert synced[:2] == [".", f"{gen}/{GENERATION_MARKER}"] and synced[-1] == "ix"
    batch = synced[2:-1]
    assert sorted(n for n in batch if not _pointer_tmp(n)) == sorted([*(f"{gen}/{n}" for n in GENERATION_FILES),
                                                                      gen, "ix"])
    assert len(batch) == len(GENERATION_FILES) + 3 and sum(map(_pointer_tmp, batch)) == 1
    assert replaced == [len(synced) - 1]  # the switch comes after every fsync of the batch, before the last
    assert len(folder_flags) == 4
    assert all(flags == os.O_RDONLY | os.O_DIRECTORY for flags in folder_flags)


def test_add_fsyncs_the_new_generation_and_the_pointer_but_creates_no_folder(tmp_path, fsyncs, monkeypatch):
    """add writes into the existing folder: no parent fsync; it fsyncs the delta segment it writes (not the
    base files it links), with the folders and the temporary pointer, before the switch, as a build does."""
    synced, folder_flags = fsyncs
    index = LocalIndex.build(tmp_path / "ix", DOCS[:1], HashingEncoder())
    synced.clear()
    folder_flags.clear()
    replaced = _replaced_after(monkeypatch, synced)
    grown = index.add(DOCS[1:], HashingEncoder())
    gen = f"ix/{grown.generation}"
    assert synced[0] == f"{gen}/{GENERATION_MARKER}" and synced[-1] == "ix"
    batch = synced[1:-1]
    assert sorted(n for n in batch if not _pointer_tmp(n)) == sorted([*(f"{gen}/{n}" for n in DELTA_WRITES), gen, "ix"])
    assert sum(map(_pointer_tmp, batch)) == 1 and replaced == [len(synced) - 1]
    assert sorted(os.listdir(tmp_path / gen)) == sorted({GENERATION_MARKER, *GENERATION_FILES, *DELTA_WRITES})
    assert folder_flags == [os.O_RDONLY | os.O_DIRECTORY] * 3


def test_a_build_in_new_nested_folders_fsyncs_the_parent(tmp_path, fsyncs):
    """Creating the index folder (and missing parents) makes the folder's entry durable in its parent."""
    synced, _ = fsyncs
    LocalIndex.build(tmp_path / "deep" / "ix", DOCS, HashingEncoder())
    assert synced[0] == "deep"


def test_folders_are_fsynced_where_the_platform_lacks_o_directory(tmp_path, monkeypatch, fsyncs):
    """Without os.O_DIRECTORY (not every platform has it) folders are opened plain read-only."""
    synced, folder_flags = fsyncs
    monkeypatch.delattr(os, "O_DIRECTORY")
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert folder_flags == [os.O_RDONLY] * 4
    assert synced.count("ix") == 2 and f"ix/{index.generation}" in synced


# ------------------------------------------------------------------ exact JSON bytes
def test_pointer_bytes(tmp_path):
    """The pointer is indented JSON with sorted keys and a final newline."""
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert (tmp_path / "ix" / "manifest.json").read_bytes() == (
        '{\n  "format": "meteora-edge-index",\n  "format_version": 3,\n'
        f'  "generation": "{index.generation}"\n}}\n'
    ).encode()


def test_generation_manifest_bytes(tmp_path):
    """The generation manifest is JSON indented by 2 with every object's keys sorted and a final newline."""
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    raw = (tmp_path / "ix" / index.generation / "manifest.json").read_bytes()
    data = json.loads(raw)
    assert raw == (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
    assert raw.startswith(b'{\n  "analyzer": {\n    "cjk": "bigrams",\n    "name": "english",\n')
    assert b'\n  },\n  "chunking": {\n    "boundaries": "text",\n    "chunk_size": 256,\n    "overlap": 25\n  },\n  "count": 2,\n' in raw
    assert list(data["files"]) == sorted(GENERATION_FILES[:-1])
    assert raw.endswith(b'\n  "updated": "' + data["updated"].encode() + b'"\n}\n')


def _writer_with_every_file(root: Path) -> GenerationWriter:
    root.mkdir()
    writer = GenerationWriter(root, None)
    for name in REQUIRED_FILES:
        writer.write_bytes(name, name.encode())
    return writer


def test_finish_refuses_a_manifest_json_cannot_hold(tmp_path):
    """NaN in a manifest is refused (ValueError) and no manifest is written: strict JSON only."""
    writer = _writer_with_every_file(tmp_path / "ix")
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        writer.finish({"score": float("nan")})
    assert not (writer.folder / "manifest.json").exists()


def test_finish_lists_every_file_with_its_hash_and_size(tmp_path):
    """finish writes the manifest with the files written so far; a file left out is a bug (RuntimeError)."""
    writer = _writer_with_every_file(tmp_path / "ix")
    writer.finish({"note": "é"})
    data = json.loads((writer.folder / "manifest.json").read_bytes())
    assert data["note"] == "é"
    assert data["files"] == {
        name: {"sha256": hashlib.sha256(name.encode()).hexdigest(), "size": len(name)} for name in REQUIRED_FILES
    }
    short = GenerationWriter(tmp_path / "ix", None)
    short.write_bytes("vectors.npy", b"x")
    with pytest.raises(RuntimeError, match=r"generation is missing \['bm25_doc_ids.npy'"):
        short.finish({})


# ------------------------------------------------------------------ the generation writer
@pytest.mark.parametrize(("after", "sequence"), [
    (None, "000001"),
    ("", "000001"),
    ("gen-000001-0123abcd", "000002"),
    ("gen-000041-ffffffff", "000042"),
    ("gen-999999-0123abcd", "1000000"),
    ("not-a-generation", "000001"),
    ("gen-000041-0123ABCD", "000001"),
])
def test_a_new_generation_is_numbered_after_the_live_one(tmp_path, after, sequence):
    """A writer's folder is gen-<sequence>-<8 hex>, one after the generation it follows (1 for none)."""
    writer = GenerationWriter(tmp_path, after)
    assert re.fullmatch(rf"gen-{sequence}-[0-9a-f]{{8}}", writer.name)
    assert writer.folder == tmp_path / writer.name and writer.folder.is_dir()
    assert writer.root == tmp_path and writer.files == {}


def test_each_write_of_an_index_takes_the_next_number(tmp_path):
    """build makes generation 1; each add the next one."""
    enc = HashingEncoder()
    index = LocalIndex.build(tmp_path / "ix", DOCS[:1], enc)
    names = [index.generation]
    for doc in DOCS[1:] + [SourceDocument("c", "Governed by the laws of England.", {})]:
        index = index.add([doc], enc)
        names.append(index.generation)
    assert [n[:10] for n in names] == ["gen-000001", "gen-000002", "gen-000003"]
    assert _pointer(tmp_path / "ix")["generation"] == names[-1]


def test_write_array_stores_npy_and_refuses_pickled_objects(tmp_path):
    """Arrays are stored as plain .npy (hash and size listed); an object array is refused, never pickled."""
    writer = GenerationWriter(tmp_path, None)
    writer.write_array("ok.npy", np.arange(3, dtype=np.int64))
    assert np.load(writer.folder / "ok.npy").tolist() == [0, 1, 2]
    raw = (writer.folder / "ok.npy").read_bytes()
    assert writer.files["ok.npy"]["size"] == len(raw)
    with pytest.raises(ValueError, match="allow_pickle=False"):
        writer.write_array("objects.npy", np.array([{"a": 1}], dtype=object))
    assert "objects.npy" not in writer.files


# ------------------------------------------------------------------ leftovers a writer removes
def test_a_write_removes_what_killed_writers_left_and_keeps_the_rest(tmp_path):
    """Unnamed generations, pointer temporaries and format-1 top-level files go; anything else stays."""
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], HashingEncoder())
    (root / "gen-000099-0123abcd").mkdir()
    (root / "gen-000099-0123abcd" / "vectors.npy").write_bytes(b"half")
    keep = ["notes.txt", "x.tmp", ".manifest.json.bak", "manifest.json.x.tmp", "vectors.npy.bak",
            "gen-99-0123abcd"]
    gone = [".manifest.json.a1b2.tmp", "vectors.npy", "bm25_vocab.json"]
    for name in keep + gone:
        (root / name).write_text("x")
    grown = index.add(DOCS[1:], HashingEncoder())
    expected = sorted([".writer.lock", grown.generation, "manifest.json", *keep])
    assert sorted(p.name for p in root.iterdir()) == expected
    assert len(LocalIndex.load(root)) == len(grown)


def test_a_leftover_that_cannot_be_removed_does_not_block_writes(tmp_path):
    """An entry named like a generation that is not a folder (rmtree fails on it) is skipped."""
    root = tmp_path / "ix"
    index = LocalIndex.build(root, DOCS[:1], HashingEncoder())
    (root / "gen-000050-0123abcd").write_text("a file, not a folder")
    (root / "gen-000051-0123abcd").symlink_to(tmp_path)
    grown = index.add(DOCS[1:], HashingEncoder())
    assert _pointer(root)["generation"] == grown.generation
    assert len(LocalIndex.load(root)) == 2
    assert tmp_path.is_dir() and (root / "gen-000050-0123abcd").exists()


def test_overwrite_of_a_pointer_naming_no_valid_generation_starts_again_at_one(tmp_path):
    """A pointer with a bad generation name counts as no live generation: every generation folder
    is a leftover, and the rebuild is numbered 1."""
    root = tmp_path / "ix"
    LocalIndex.build(root, DOCS[:1], HashingEncoder()).add(DOCS[1:], HashingEncoder())
    (root / "manifest.json").write_text(json.dumps(
        {"format": "meteora-edge-index", "format_version": 2, "generation": "../elsewhere"}))
    rebuilt = LocalIndex.build(root, DOCS, HashingEncoder(), overwrite=True)
    assert rebuilt.generation.startswith("gen-000001-")
    assert sorted(p.name for p in root.iterdir()) == [".writer.lock", rebuilt.generation, "manifest.json"]


# ------------------------------------------------------------------ which folders may receive an index
@pytest.mark.parametrize("names", [
    [],
    [".writer.lock"],
    ["gen-000001-0123abcd"],
    [".manifest.json.k3j4.tmp", ".writer.lock", "gen-000123456789-ffffffff"],
])
def test_a_folder_of_leftovers_is_free(tmp_path, names):
    """Missing, empty, or holding only what a killed first build leaves (lock, unnamed generations,
    pointer temporaries): free to build in."""
    assert target_state(tmp_path / "missing") == "free"
    root = tmp_path / "ix"
    root.mkdir()
    for name in names:
        (root / name).mkdir() if name.startswith("gen-") else (root / name).write_text("")
    assert target_state(root) == "free"


@pytest.mark.parametrize(("names", "holds"), [
    (["notes.tmp"], "'notes.tmp'"),
    ([".manifest.json.bak"], "'.manifest.json.bak'"),
    (["manifest.json.tmp"], "'manifest.json.tmp'"),
    ([".manifest.json.tmp.x"], "'.manifest.json.tmp.x'"),
    (["gen-00001-0123abcd"], "'gen-00001-0123abcd'"),
    (["gen-000001-0123ABCD"], "'gen-000001-0123ABCD'"),
    (["gen-000001-0123abcd.old"], "'gen-000001-0123abcd.old'"),
    ([".writer.lock.x"], "'.writer.lock.x'"),
    (["b.txt", ".writer.lock", "a.txt", "c"], "'a.txt' and 2 more"),
])
def test_a_folder_with_anything_else_is_refused(tmp_path, names, holds):
    """Any other entry makes the folder someone else's: refused, naming the first stranger."""
    root = tmp_path / "ix"
    root.mkdir()
    for name in names:
        (root / name).write_text("")
    with pytest.raises(InputError) as err:
        target_state(root)
    assert str(err.value) == f"{root} is a folder that is not a meteora-edge index (it holds {holds}); {REFUSE}"


def test_a_file_or_a_foreign_manifest_is_refused_and_an_index_is_recognised(tmp_path):
    """A file is refused; a manifest.json without the index marker is refused; an index is 'index'."""
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(InputError) as err:
        target_state(target)
    assert str(err.value) == f"{target} exists and is not a folder; {REFUSE}"
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(InputError) as err:
        target_state(other)
    assert str(err.value) == f"{other} holds a manifest.json that is not a meteora-edge index; {REFUSE}"
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert target_state(tmp_path / "ix") == "index"
