"""What a build records and what loading checks across files: offsets against the chunk file, BM25 against the vectors."""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pytest

from meteora_edge.errors import ConfigError, InputError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.models.encoders import HashingEncoder

DOCS = [SourceDocument("a", "alpha beta gamma delta epsilon zeta eta theta iota"), SourceDocument("b", "kappa lambda")]
ENCODER = HashingEncoder(n_features=16)


def _build(root, **kwargs):
    return LocalIndex.build(root, DOCS, ENCODER, chunk_size=4, overlap=0, **kwargs)


def _generation(root):
    return root / json.loads((root / "manifest.json").read_text())["generation"]


def _replace(gen, name, data: bytes):
    """Rewrite one file of a generation and record its new size and hash, as a consistent but wrong writer would."""
    (gen / name).write_bytes(data)
    manifest = json.loads((gen / "manifest.json").read_text())
    manifest["files"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (gen / "manifest.json").write_text(json.dumps(manifest))


def _replace_array(gen, name, array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    _replace(gen, name, buffer.getvalue())


def _load_error(root):
    with pytest.raises(LocalIndexError) as caught:
        LocalIndex.load(root)
    return str(caught.value)


# ------------------------------------------------------------------ build records its settings
def test_build_records_the_chunking_it_was_given(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", DOCS, ENCODER, chunk_size=4, overlap=1)
    assert index.manifest["chunking"] == {"chunk_size": 4, "overlap": 1, "boundaries": "text"}
    assert LocalIndex.load(tmp_path / "ix").manifest["chunking"] == {"chunk_size": 4, "overlap": 1, "boundaries": "text"}
    by_words = LocalIndex.build(tmp_path / "words", DOCS, ENCODER, chunk_size=4, overlap=1, boundaries="words")
    assert LocalIndex.load(tmp_path / "words").manifest["chunking"]["boundaries"] == "words" == by_words.manifest[
        "chunking"]["boundaries"]
    with pytest.raises(ConfigError, match="boundaries must be one of text, words"):
        LocalIndex.build(tmp_path / "bad", DOCS, ENCODER, boundaries="lines")
    assert not (tmp_path / "bad").exists()


def test_build_without_overlap_records_a_tenth_of_the_chunk_size(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", DOCS, ENCODER, chunk_size=20)
    assert index.manifest["chunking"] == {"chunk_size": 20, "overlap": 2, "boundaries": "text"}


def test_build_records_encoder_counts_and_the_write(tmp_path):
    index = _build(tmp_path / "ix")
    assert len(index) == 4
    assert index.manifest["encoder"] == {"id": "hashing:16", "dimension": 16}
    assert index.manifest["last_write"] == {"op": "build", "chunks": 4}
    assert index.manifest["count"] == 4
    vocab = json.loads((_generation(tmp_path / "ix") / "bm25_vocab.json").read_bytes().decode("utf-8"))
    assert vocab["terms"][:3] == ["alpha", "beta", "gamma"]


def _another_build_meanwhile(root):
    """A progress callback that, while the embedding runs, lets another build finish at ``root`` (once)."""
    overtaken: list[str] = []

    def progress(done, total):
        if not overtaken:
            overtaken.append(_build(root).generation)

    return progress, overtaken


def test_a_build_that_another_build_overtook_is_refused(tmp_path):
    """The target is checked again under the writer lock: a build that finished meanwhile is not replaced."""
    root = tmp_path / "ix"
    progress, overtaken = _another_build_meanwhile(root)
    with pytest.raises(InputError) as caught:
        LocalIndex.build(root, DOCS, ENCODER, chunk_size=4, overlap=0, progress=progress)
    assert str(caught.value) == f"{root} already exists; use 'add' to append or 'overwrite' to rebuild"
    assert LocalIndex.load(root).generation == overtaken[0]


def test_a_build_that_another_build_overtook_replaces_it_with_overwrite(tmp_path):
    root = tmp_path / "ix"
    progress, overtaken = _another_build_meanwhile(root)
    index = LocalIndex.build(root, DOCS, ENCODER, chunk_size=4, overlap=0, overwrite=True, progress=progress)
    assert index.generation != overtaken[0]
    assert LocalIndex.load(root).generation == index.generation


# ------------------------------------------------------------------ loading checks the files against each other
def test_a_loaded_index_maps_its_arrays_instead_of_reading_them(tmp_path):
    index = LocalIndex.load(_build(tmp_path / "ix").root)
    assert isinstance(index.vectors, np.memmap)
    assert all(isinstance(a, np.memmap) for a in (index.bm25.term_ptr, index.bm25.doc_ids, index.bm25.tf,
                                                   index.bm25.doc_len))
    assert [r["text"] for r in index.records(range(4))] == ["alpha beta gamma delta", "epsilon zeta eta theta",
                                                           "iota", "kappa lambda"]


OFFSETS = {
    "not-from-0": lambda o, size: o + 1,
    "repeated": lambda o, size: np.array([o[0], o[1], o[1], o[3]]),
    "decreasing": lambda o, size: np.array([o[0], o[2], o[1], o[3]]),
    "last-at-the-end-of-the-file": lambda o, size: np.array([o[0], o[1], o[2], size]),
    "last-past-the-end": lambda o, size: np.array([o[0], o[1], o[2], size + 5]),
}


@pytest.mark.parametrize("change", OFFSETS.values(), ids=OFFSETS)
def test_chunk_offsets_that_do_not_fit_the_chunk_file_are_refused(tmp_path, change):
    root = tmp_path / "ix"
    _build(root)
    gen = _generation(root)
    offsets = np.load(gen / "chunk_offsets.npy")
    _replace_array(gen, "chunk_offsets.npy", change(offsets, (gen / "chunks.jsonl").stat().st_size).astype("<i8"))
    assert _load_error(root) == f"chunk offsets in {gen} do not fit chunks.jsonl; rebuild the index"


def test_a_chunk_file_without_its_final_newline_is_refused(tmp_path):
    root = tmp_path / "ix"
    _build(root)
    gen = _generation(root)
    _replace(gen, "chunks.jsonl", (gen / "chunks.jsonl").read_bytes()[:-1] + b" ")
    assert _load_error(root) == f"chunk offsets in {gen} do not fit chunks.jsonl; rebuild the index"


def test_bm25_over_another_number_of_chunks_than_the_vectors_is_refused(tmp_path):
    root = tmp_path / "ix"
    _build(root)
    gen = _generation(root)
    doc_len = np.load(gen / "bm25_doc_len.npy")
    _replace_array(gen, "bm25_doc_len.npy", np.concatenate([doc_len, [0]]).astype(doc_len.dtype))
    assert _load_error(root) == f"index {gen}: BM25 covers 5 chunks, vectors 4; rebuild it"


@pytest.mark.parametrize("batch_size", [0, -3, 2.5, "8"])
def test_a_bad_batch_size_is_refused_with_its_value(tmp_path, batch_size):
    """build refuses a batch size that is not a positive integer, naming the value, and writes nothing."""
    with pytest.raises(ConfigError) as caught:
        LocalIndex.build(tmp_path / "idx", DOCS, ENCODER, batch_size=batch_size)
    assert str(caught.value) == f"batch_size must be a positive integer, got {batch_size!r}"
    assert not (tmp_path / "idx").exists()


def test_index_build_says_the_same_in_its_flags(tmp_path):
    """The library names its parameters ('overwrite'); ``index build`` puts its flag in their place."""
    from click.testing import CliRunner

    from meteora_edge.cli.main import main

    source = tmp_path / "notes.md"
    source.write_text("Either party may terminate the agreement.")
    first = CliRunner().invoke(main, ["index", "build", str(source), "--out", str(tmp_path / "ix")])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(main, ["index", "build", str(source), "--out", str(tmp_path / "ix")])
    assert again.exit_code == 1
    assert again.output.strip().endswith("already exists; use 'index add' to append or --overwrite to rebuild")
