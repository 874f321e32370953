"""JSON Lines splits on \\n only: U+2028, U+2029 and U+0085 are valid raw inside JSON strings (D5)."""

from __future__ import annotations

import json

import pytest

from meteora_edge.errors import InputError
from meteora_edge.fileio import read_chunks_file, read_json_or_jsonl
from meteora_edge.index.corpus import read_documents

BREAKS = ["\u2028", "\u2029", "\u0085", "\x1c", "\x0b", "\x0c"]


def _jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    return path


@pytest.mark.parametrize("mark", BREAKS)
def test_a_raw_line_separator_inside_a_string_stays_in_the_string(tmp_path, mark):
    texts = [f"first{mark}half", "second line"]
    assert read_json_or_jsonl(_jsonl(tmp_path / "a.jsonl", texts)) == [{"text": t} for t in texts]


@pytest.mark.parametrize("mark", BREAKS)
def test_indexing_reads_every_document_of_such_a_file(tmp_path, mark):
    texts = [f"Either party{mark}may terminate.", "Fees are due monthly."]
    docs = read_documents([_jsonl(tmp_path / "docs.jsonl", texts)], strict=True)
    assert [d.text for d in docs] == texts


def test_chunk_files_in_json_lines_keep_the_separator(tmp_path):
    assert read_chunks_file(_jsonl(tmp_path / "c.jsonl", ["a\u2028b", "c"])) == [{"text": "a\u2028b"}, {"text": "c"}]


def test_crlf_lines_still_read_and_errors_still_name_the_line(tmp_path):
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b'{"text": "a"}\r\n{"text": "b"}\r\n')
    assert read_json_or_jsonl(path) == [{"text": "a"}, {"text": "b"}]
    path.write_text('{"text": "a\u2028b"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2 is not valid JSON"):
        read_json_or_jsonl(path)
