"""Which documents an index already holds (``index add`` stays idempotent), and where a record came from."""

from __future__ import annotations

import hashlib

import pytest

from meteora_edge.index.chunking import chunk_text
from meteora_edge.index.content_hashes import record_file, source_counts, unseen_documents
from meteora_edge.index.corpus import SourceDocument


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Records:
    """A stored index as unseen_documents sees it: a manifest and records read by id."""

    def __init__(self, records: list[dict], *, chunk_size: int = 4, overlap: int = 1) -> None:
        self.stored = records
        self.manifest = {"chunking": {"chunk_size": chunk_size, "overlap": overlap}}
        self.reads: list[list[int]] = []

    def __len__(self) -> int:
        return len(self.stored)

    def records(self, ids):
        self.reads.append(list(ids))
        return [self.stored[i] for i in ids]


def _records_of(texts, **chunking):
    size, overlap = chunking.get("chunk_size", 4), chunking.get("overlap", 1)
    chunks = [c.text for t in texts for c in chunk_text(t, size, overlap)]
    return Records([{"text": c, "sha256": _sha(c)} for c in chunks], **chunking)


def _doc(name: str, text: str) -> SourceDocument:
    return SourceDocument(name, text, {"source": name}, name)


def test_documents_whose_every_chunk_is_stored_are_known_and_changed_ones_are_new():
    old = "either party may terminate the agreement with thirty days written notice"
    index = _records_of([old, "fees are due monthly"])
    docs = [_doc("same", old), _doc("changed", old + " by post"), _doc("part", "fees are due"),
            _doc("fees", "fees are due monthly")]
    assert [d.source_id for d in unseen_documents(index, docs)] == ["changed", "part"]


def test_the_index_chunking_decides_what_counts_as_stored():
    text = " ".join(f"w{i}" for i in range(60))
    index = _records_of([text], chunk_size=20, overlap=5)  # not the default overlap (20 // 10)
    assert unseen_documents(index, [_doc("a", text)]) == []


def test_a_blank_document_is_passed_on_for_the_writer_to_judge():
    blank = _doc("blank", " \n\t ")
    assert unseen_documents(_records_of(["x y"]), [blank]) == [blank]


def test_a_lone_surrogate_is_hashed_not_raised_here():
    odd = _doc("odd", "fees \ud800 due")
    assert unseen_documents(_records_of(["x y"]), [odd]) == [odd]


def test_records_are_read_once_in_batches_and_reading_stops_when_all_are_found():
    records = [{"text": f"filler {i}", "sha256": _sha(f"filler {i}")} for i in range(10_000)]
    records[3] = {"text": "fees are due", "sha256": _sha("fees are due")}
    index = Records(records)
    assert unseen_documents(index, [_doc("fees", "fees are due")]) == []
    assert index.reads == [list(range(4096))]  # found in the first batch: no more reads
    late = _doc("late", "filler 9999")
    assert unseen_documents(index, [late]) == []
    read = [i for batch in index.reads[1:] for i in batch]
    assert sorted(read) == list(range(10_000)) == read  # every record once, in order


def test_a_stored_hash_is_trusted_and_records_without_one_are_hashed_from_their_text():
    stored_hash_only = {"sha256": _sha("fees are due")}  # no text to read: its hash is enough
    old_format = {"text": "either party may terminate", "sha256": None}
    index = Records([stored_hash_only, old_format])
    docs = [_doc("fees", "fees are due"), _doc("terminate", "either party may terminate"), _doc("new", "new text")]
    assert [d.source_id for d in unseen_documents(index, docs)] == ["new"]


@pytest.mark.parametrize(("record", "expected"), [
    ({"file": "a.txt", "metadata": {"source": "m"}, "source": "s"}, "a.txt"),
    ({"file": None, "metadata": {"source": "m"}, "source": "s"}, "m"),
    ({"metadata": {"source": "m"}, "source": "s"}, "m"),
    ({"metadata": {"title": "t"}, "source": "s"}, "s"),
    ({"metadata": "not an object", "source": "s"}, "s"),
    ({"source": "s"}, "s"),
])
def test_record_file_prefers_the_file_then_the_metadata_source_then_the_document_id(record, expected):
    assert record_file(record) == expected


def test_source_counts_counts_files_and_documents_up_to_the_limit():
    rows = [("a.txt", "doc1"), ("a.txt", "doc1"), ("a.txt", "doc2"), ("b.txt", "doc3")]
    index = Records([{"text": f"t{i}", "file": f, "source": s} for i, (f, s) in enumerate(rows)])
    assert source_counts(index) == (2, 3)
    assert source_counts(index, limit=4) == (2, 3)
    assert source_counts(index, limit=3) == (None, None)  # too many chunks to read them all
    assert source_counts(Records([])) == (None, None)
