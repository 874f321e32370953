"""The chunks.jsonl record line, byte for byte: key order, the sha256 of the text, UTF-8 without
escapes, and the one-line errors for what JSON or UTF-8 cannot store; and chunk_records, which
chunks documents into such lines."""

import hashlib
import json
import math

import pytest

from meteora_edge.errors import InputError
from meteora_edge.index.chunk_records import chunk_records, record_line
from meteora_edge.index.corpus import SourceDocument


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- the line's exact bytes -----------------------------------------------------------------------

def test_a_record_line_leads_with_id_text_and_the_digest_then_keeps_the_callers_order():
    """id, text and sha256 come first whatever order the record has; the other keys follow in
    the record's own order; the line is compact-separator JSON ending in one newline."""
    record = {"metadata": {"lang": "en"}, "source": "doc-1", "text": "plain words", "position": 0, "id": 7}
    expected = ('{"id": 7, "text": "plain words", "sha256": "%s", "metadata": {"lang": "en"}, "source": "doc-1", '
                '"position": 0}\n' % _sha("plain words"))
    assert record_line(record) == expected.encode("ascii")


def test_a_stale_digest_in_the_record_is_replaced_by_the_digest_of_its_text():
    """A record read back from an index (format 1 or edited by hand) may carry a sha256 that no
    longer matches its text: the line always holds the digest of the text it stores."""
    line = record_line({"id": 3, "text": "fresh text", "sha256": "0" * 64, "source": "d"})
    assert line == ('{"id": 3, "text": "fresh text", "sha256": "%s", "source": "d"}\n' % _sha("fresh text")).encode()


def test_non_ascii_text_and_metadata_are_stored_as_utf8_not_escaped():
    """Accented letters, CJK and emoji are written as their UTF-8 bytes (no \\uXXXX escapes), and
    the digest is the sha256 of the text's UTF-8 bytes."""
    text = "café 東京 ☕"
    line = record_line({"id": 0, "text": text, "source": "naïve", "metadata": {"title": "Zürich"}})
    expected = '{"id": 0, "text": "café 東京 ☕", "sha256": "%s", "source": "naïve", "metadata": {"title": "Zürich"}}\n'
    assert line == (expected % hashlib.sha256(text.encode("utf-8")).hexdigest()).encode("utf-8")
    assert b"\\u" not in line
    assert json.loads(line)["text"] == text


# -- what the line cannot store: one clear InputError each ---------------------------------------

@pytest.mark.parametrize("record,bad", [
    ({"id": 0, "text": "half \ud800 of a pair", "source": "doc-7", "metadata": {}}, "\\ud800"),
    ({"id": 0, "text": "fine", "source": "doc-7", "metadata": {"title": "x\udfffy"}}, "\\udfff"),
])
def test_a_lone_surrogate_in_text_or_metadata_is_refused_naming_the_document_and_the_code_point(record, bad):
    """A lone surrogate (e.g. from a file decoded with surrogateescape) cannot be UTF-8: the error
    names the document and shows the code point as an escape, and says what to fix."""
    with pytest.raises(InputError) as info:
        record_line(record)
    assert str(info.value) == (f"document 'doc-7' holds a lone surrogate ({bad}) that UTF-8 cannot store; "
                               "fix the document's text or metadata")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_or_infinity_in_metadata_is_refused_rather_than_written_as_invalid_json(value):
    """Python's json would write NaN/Infinity, which is not JSON; the record is refused instead."""
    with pytest.raises(InputError) as info:
        record_line({"id": 0, "text": "t", "source": "doc-2", "metadata": {"score": value}})
    assert str(info.value) == ("the metadata of document 'doc-2' holds NaN or Infinity, which JSON cannot store; "
                               "remove the value or write it as a string")


@pytest.mark.parametrize("value,kind", [({1, 2}, "set"), (b"raw", "bytes")])
def test_metadata_that_is_not_json_is_refused_naming_the_offending_type(value, kind):
    with pytest.raises(InputError) as info:
        record_line({"id": 0, "text": "t", "source": "doc-3", "metadata": {"tags": value}})
    assert str(info.value) == (f"the metadata of document 'doc-3' is not JSON "
                               f"(Object of type {kind} is not JSON serializable)")


# -- chunk_records --------------------------------------------------------------------------------

TEN_WORDS = " ".join(f"w{i}" for i in range(10))


def test_chunk_records_numbers_chunks_from_start_id_and_honours_the_overlap():
    """Chunks of 4 words overlapping by 2 start every 2 words; ids count on from ``start_id``
    across documents; every line carries the document's id, metadata and file."""
    docs = [SourceDocument("a", TEN_WORDS, {"k": 1}, "a.txt"), SourceDocument("b", "x y", {}, None)]
    texts, lines = chunk_records(docs, 5, 4, 2)
    records = [json.loads(line) for line in lines]
    assert [(r["id"], r["source"], r["position"], r["text"], r["start"], r["end"]) for r in records] == [
        (5, "a", 0, "w0 w1 w2 w3", 0, 11),
        (6, "a", 1, "w2 w3 w4 w5", 6, 17),
        (7, "a", 2, "w4 w5 w6 w7", 12, 23),
        (8, "a", 3, "w6 w7 w8 w9", 18, 29),
        (9, "b", 0, "x y", 0, 3),
    ]
    assert [(r["metadata"], r["file"]) for r in records] == [({"k": 1}, "a.txt")] * 4 + [({}, None)]
    assert list(texts) == [r["text"] for r in records] and texts[1:3] == ["w2 w3 w4 w5", "w4 w5 w6 w7"]
    assert all(line == record_line(r) for line, r in zip(lines, records))


def test_chunk_records_with_zero_overlap_does_not_repeat_words():
    texts, _ = chunk_records([SourceDocument("a", TEN_WORDS)], 0, 4, 0)
    assert list(texts) == ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
