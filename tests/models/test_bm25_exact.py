"""BM25Index edge cases with exact answers: an empty ``within``, ids given as a column, the two-posting
sortedness check, and what ``load`` refuses (an unsafe .npy header) and names (the folder), in any locale."""

from __future__ import annotations

import json
import locale
import struct

import numpy as np
import pytest

from meteora_edge.errors import LocalIndexError
from meteora_edge.models.bm25 import BM25_ARRAYS, BM25_VOCAB, BM25Index, bm25_tokens

TEXTS = ["red apple", "green apple pie", "blue sky", "apple apple"]


@pytest.fixture
def index():
    return BM25Index.build([bm25_tokens(t) for t in TEXTS])


# -- search(within=...) ------------------------------------------------------------------------------

@pytest.mark.parametrize("within", [[], ()])
def test_search_within_no_documents_finds_nothing(index, within):
    """``within`` an empty list restricts the search to no document: no ids, no scores (not an error)."""
    ids, scores = index.search("apple", 10, within=within)
    assert ids.tolist() == [] and scores.tolist() == []


def test_search_within_keeps_only_those_documents_with_their_full_scores(index):
    ids, scores = index.search("apple", 10, within=(3, 2, 0))
    everything = index.scores(["apple"])
    assert ids.tolist() == [3, 0] and scores.tolist() == [everything[3], everything[0]]


# -- scores_for ids in any array shape --------------------------------------------------------------

def test_scores_for_ids_given_as_a_column_equals_the_flat_list(index):
    """Ids as ``np.argwhere`` gives them (an (n, 1) column) are read as the flat list of ids."""
    column = np.argwhere(np.array([True, False, True, True]))  # [[0], [2], [3]]
    assert column.shape == (3, 1)
    got = index.scores_for(["apple", "pie"], column)
    assert got.shape == (3,) and got.dtype == np.float64
    assert got.tolist() == index.scores(["apple", "pie"])[[0, 2, 3]].tolist()


# -- postings must rise within a term, even when there are just two ------------------------------------

def _one_term(doc_ids):
    return BM25Index.from_stored({"params": {"k1": 1.5, "b": 0.75, "epsilon": 0.25}, "terms": ["a"]},
                                 np.array([0, len(doc_ids)], dtype=np.int64), np.array(doc_ids, dtype=np.int32),
                                 np.ones(len(doc_ids), dtype=np.int32), np.ones(3, dtype=np.int32), where="ix")


@pytest.mark.parametrize("doc_ids", [[1, 0], [2, 2], [0, 2, 1]])
def test_two_or_three_postings_out_of_order_are_refused(doc_ids):
    with pytest.raises(LocalIndexError) as info:
        _one_term(doc_ids)
    assert str(info.value) == "BM25 postings in ix are not sorted by document within each term; rebuild the index"


@pytest.mark.parametrize("doc_ids", [[0, 1], [0, 2], [0, 1, 2]])
def test_rising_postings_load_and_score_their_documents(doc_ids):
    loaded = _one_term(doc_ids)
    assert np.flatnonzero(loaded.scores(["a"])).tolist() == doc_ids
    assert loaded.scores_for(["a"], [2, 1, 0]).tolist() == loaded.scores(["a"])[[2, 1, 0]].tolist()


# -- load: what it refuses and how it names the folder --------------------------------------------------

def _write_npy_with_header_padding(path, array, header_bytes):
    """A valid version-2 .npy whose header is padded with spaces to about ``header_bytes``."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (array.dtype.str, array.shape[0])
    header += " " * (header_bytes - len(header))
    header += " " * ((64 - (12 + len(header) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header.encode("latin-1")
                     + array.tobytes())


def test_load_refuses_an_npy_header_numpy_deems_unsafe(tmp_path, index):
    """An array file whose header passes numpy's safety limit (10 000 bytes) is refused as corrupt,
    though the array in it is fine."""
    index.save(tmp_path)
    name = BM25_ARRAYS[0][0]
    array = np.load(tmp_path / name)
    _write_npy_with_header_padding(tmp_path / name, array, 2_000)
    assert BM25Index.load(tmp_path).scores(["apple"]).tolist() == index.scores(["apple"]).tolist()  # small: fine
    _write_npy_with_header_padding(tmp_path / name, array, 20_000)
    with pytest.raises(LocalIndexError) as info:
        BM25Index.load(tmp_path)
    assert str(info.value).startswith(f"BM25 files in {tmp_path} are missing or corrupt (Header info length")


def test_load_names_the_folder_when_the_files_contradict_each_other(tmp_path, index):
    index.save(tmp_path)
    np.save(tmp_path / "bm25_doc_len.npy", np.ones(2, dtype=np.int32))  # 2 documents, postings name doc 3
    with pytest.raises(LocalIndexError) as info:
        BM25Index.load(tmp_path)
    assert str(info.value) == f"BM25 files in {tmp_path} are inconsistent with each other; rebuild the index"


@pytest.fixture
def ascii_locale():
    """LC_CTYPE "C" for the test: files opened without an encoding would be read as ASCII
    (unless Python runs in UTF-8 mode, where the locale does not matter)."""
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def test_load_reads_a_utf8_vocabulary_whatever_the_locale(tmp_path, ascii_locale):
    """The local index writes the vocabulary as UTF-8 (not \\u-escaped); it loads under an ASCII locale too."""
    index = BM25Index.build([bm25_tokens(t) for t in ["Café crème", "naïve café", "plain text"]])
    index.save(tmp_path)
    (tmp_path / BM25_VOCAB).write_bytes(json.dumps(index.vocab_document(), ensure_ascii=False).encode("utf-8"))
    loaded = BM25Index.load(tmp_path)
    assert loaded.vocab == index.vocab and "café" in loaded.vocab
    assert loaded.scores(["café"]).tolist() == index.scores(["café"]).tolist()


def test_a_lone_posting_among_empty_documents_scores():
    """One word in one of three documents (the others empty) is still a rare, positive-scoring term."""
    index = BM25Index.build([["alpha"], [], []])
    scores = index.scores(["alpha"])
    assert scores[0] > 0 and scores[1] == scores[2] == 0


def test_a_one_document_corpus_keeps_its_term_weights():
    """With a single document every term is in all documents: its weight is the epsilon floor, not zero."""
    index = BM25Index.build([["alpha", "beta"]])
    assert index.scores(["alpha"])[0] != 0
    assert index.scores(["gamma"])[0] == 0
