"""Small index helpers with exact contracts: ``finite`` (format-1 records without NaN), what a failed
write leaves behind (``new_generation``), ``source_counts``'s 200 000-chunk limit, and streaming
chunking freeing the blocks behind its window."""

import gc
import hashlib
import json
import os
import re
import weakref

import numpy as np
import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import InputError, LocalIndexError
from meteora_edge.index.chunk_records import finite
from meteora_edge.index.chunking import iter_chunks
from meteora_edge.index.content_hashes import source_counts
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.generations import new_generation, writer_lock
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.index.manifest import INDEX_FORMAT, INDEX_FORMAT_VERSION

NAN, INF = float("nan"), float("inf")


# -- finite ----------------------------------------------------------------------------------------

def test_finite_replaces_nan_and_infinities_at_any_depth_and_keeps_everything_else():
    record = {
        "id": 3, "text": "t", "score": NAN, "flag": True, "missing": None,
        "scores": [1.5, INF, -INF, 0.0, [NAN, 2]],
        "metadata": {"p": -INF, "ok": 0.25, "tags": ["a", NAN], "deep": {"x": NAN}},
    }
    assert finite(record) == {
        "id": 3, "text": "t", "score": None, "flag": True, "missing": None,
        "scores": [1.5, None, None, 0.0, [None, 2]],
        "metadata": {"p": None, "ok": 0.25, "tags": ["a", None], "deep": {"x": None}},
    }
    assert record["score"] != record["score"]  # the caller's record is left as it was
    assert json.dumps(finite(record), allow_nan=False)  # strict JSON from here on


@pytest.mark.parametrize("value", [0, -7, 2.5, -0.0, 1e308, "nan", "", True, None])
def test_finite_keeps_finite_and_non_float_values(value):
    assert finite(value) == value and type(finite(value)) is type(value)


# -- a write that fails ------------------------------------------------------------------------------

DOCS = [SourceDocument("a", "Either party may terminate the agreement on ninety days notice.", {})]


@pytest.fixture
def index_root(tmp_path):
    LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), chunk_size=4, overlap=0)
    return tmp_path / "ix"


def _fail_while_writing(root, before_failing=None):
    """Start a new generation under the writer lock, write a file into it, then fail; return the writer."""
    seen = {}
    with pytest.raises(RuntimeError, match="disk on fire"):
        with writer_lock(root, create=False), new_generation(root) as writer:
            seen["writer"] = writer
            writer.write_bytes("vectors.npy", b"half a file")
            if before_failing:
                before_failing(writer)
            raise RuntimeError("disk on fire")
    return seen["writer"]


def test_a_write_failing_before_the_switch_removes_its_generation_and_keeps_the_index(index_root):
    live = LocalIndex.load(index_root)
    writer = _fail_while_writing(index_root)
    assert not writer.folder.exists()
    assert sorted(os.listdir(index_root)) == [".writer.lock", live.generation, "manifest.json"]
    again = LocalIndex.load(index_root)
    assert again.generation == live.generation and again.records([0])[0]["text"] == "Either party may terminate"


def test_a_failure_landing_just_after_the_switch_keeps_the_generation_the_pointer_names(index_root):
    """The pointer already names the new generation (an interrupt right after the switch): it is live, so kept."""
    def switch(writer):
        pointer = {"format": INDEX_FORMAT, "format_version": INDEX_FORMAT_VERSION, "generation": writer.name}
        (index_root / "manifest.json").write_text(json.dumps(pointer))

    writer = _fail_while_writing(index_root, switch)
    assert writer.folder.exists() and (writer.folder / "vectors.npy").read_bytes() == b"half a file"


def test_a_failure_with_an_unreadable_pointer_removes_nothing(index_root):
    """When the pointer cannot be read, the new generation might be the live one: it stays."""
    def break_pointer(writer):
        (index_root / "manifest.json").unlink()
        (index_root / "manifest.json").mkdir()  # reading it now fails with an OSError

    writer = _fail_while_writing(index_root, break_pointer)
    assert writer.folder.exists()


# -- source_counts ------------------------------------------------------------------------------------

class _Chunks:
    """An index of ``n`` chunks: two per document, four documents per file."""

    manifest: dict = {}

    def __init__(self, n):
        self.n = n
        self.read = 0

    def __len__(self):
        return self.n

    def records(self, ids):
        self.read += len(ids)
        return [{"id": i, "text": "t", "source": f"doc{i // 2}", "file": f"file{i // 8}"} for i in ids]


def test_source_counts_reads_every_record_up_to_200000_chunks():
    chunks = _Chunks(200_000)
    assert source_counts(chunks) == (25_000, 100_000) and chunks.read == 200_000


def test_source_counts_over_200000_chunks_is_unknown_without_reading_a_record():
    chunks = _Chunks(200_001)
    assert source_counts(chunks) == (None, None) and chunks.read == 0


# -- streaming chunking lets go of the text behind it ---------------------------------------------------

class _Block(str):
    """A block of text that a weak reference can watch being freed."""


def test_streaming_chunking_lets_go_of_a_block_once_the_window_has_moved_past_its_end():
    """Blocks ending exactly where the window now starts are no longer held: after the first chunk
    ("one two"; the window moves on to "two"), the block "one " is freed."""
    watched = []

    def blocks():
        for text in ["one ", "two ", "three ", "four"]:
            block = _Block(text)
            watched.append(weakref.ref(block))
            yield block

    chunks = iter_chunks(blocks(), chunk_size=2, overlap=1)
    first = next(chunks)
    assert (first.text, first.start_pos, first.end_pos) == ("one two", 0, 7)
    gc.collect()
    assert watched[0]() is None and watched[1]() is not None
    assert [c.text for c in chunks] == ["two three", "three four"]


# -- which folders a build may write into ----------------------------------------------------------------

@pytest.mark.parametrize("stranger", ["draft.tmp", ".manifest.json.notes", "gen-1"])
def test_build_refuses_a_folder_holding_a_file_that_only_looks_like_a_leftover(tmp_path, stranger):
    """Only a pointer temporary (``.manifest.json.*.tmp``) counts as a killed writer's leftover; a name that
    has just the suffix or just the prefix is somebody's file, and the folder is left untouched."""
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / stranger).write_text("mine")
    with pytest.raises(InputError) as info:
        LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert str(info.value) == (f"{tmp_path / 'ix'} is a folder that is not a meteora-edge index (it holds "
                               f"{stranger!r}); refusing to touch it; choose another --out")
    assert os.listdir(tmp_path / "ix") == [stranger]


def test_build_takes_over_a_folder_holding_only_a_killed_writers_leftovers(tmp_path):
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / ".manifest.json.k3j9.tmp").write_text("{")
    (tmp_path / "ix" / ".writer.lock").write_text("")
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert sorted(os.listdir(tmp_path / "ix")) == [".writer.lock", index.generation, "manifest.json"]


def test_each_write_numbers_its_generation_one_after_the_live_one(tmp_path):
    """Generation names count the writes (gen-000001-…, gen-000002-…), so a folder listing shows their order."""
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    assert re.fullmatch(r"gen-000001-[0-9a-f]{8}", index.generation)
    for number in (2, 3):
        index = index.add([SourceDocument(f"d{number}", f"Clause {number} applies.", {})], HashingEncoder())
        assert re.fullmatch(rf"gen-00000{number}-[0-9a-f]{{8}}", index.generation)
    rebuilt = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder(), overwrite=True)
    assert rebuilt.generation.startswith("gen-000004-")


# -- what a write leaves on disk ---------------------------------------------------------------------------

def test_manifests_are_written_as_canonical_json(tmp_path):
    """The pointer and the generation's manifest are sorted-key JSON indented by two spaces, ending in a
    newline: the same content always gives the same bytes, and a diff of two versions reads line by line."""
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    for path in (tmp_path / "ix" / "manifest.json", tmp_path / "ix" / index.generation / "manifest.json"):
        text = path.read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
        assert text.startswith('{\n  "') and len(text.splitlines()) > 4


def test_a_stray_file_named_like_a_generation_does_not_block_a_write(tmp_path):
    """Clearing old generations before a write skips what it cannot remove (here a file, not a folder)."""
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    (tmp_path / "ix" / "gen-000077-deadbeef").write_text("not a generation folder")
    grown = index.add([SourceDocument("b", "Fees are payable monthly.", {})], HashingEncoder())
    assert len(grown) == len(index) + 1
    assert (tmp_path / "ix" / "gen-000077-deadbeef").read_text() == "not a generation folder"


@pytest.mark.parametrize(("name", "expected"), [("vectors.npy", "float32 ({n}, 384)"), ("chunk_offsets.npy", "int64 ({n},)")])
def test_an_array_file_of_another_dtype_is_refused_naming_it(tmp_path, name, expected):
    index = LocalIndex.build(tmp_path / "ix", DOCS, HashingEncoder())
    generation = tmp_path / "ix" / index.generation
    wrong = np.load(generation / name).astype(np.float64)
    np.save(generation / name, wrong)
    manifest = json.loads((generation / "manifest.json").read_text())
    data = (generation / name).read_bytes()
    manifest["files"][name].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    (generation / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(LocalIndexError) as info:
        LocalIndex.load(tmp_path / "ix")
    assert str(info.value) == (f"{generation / name} holds float64 {wrong.shape}, "
                               f"expected {expected.format(n=len(index))}; rebuild the index")
