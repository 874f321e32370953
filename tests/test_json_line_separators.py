"""Every JSON and JSON-lines output writes U+2028/U+2029 as ``\\u`` escapes: a client that splits on
Unicode line breaks (``str.splitlines``, older JavaScript) still sees one line per object."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli.main import main
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.integrations.service import SelectService
from meteora_edge.integrations.stdio import serve_stdio

TEXT = "Either party may terminate\u2028on ninety days notice.\u2029Fees are due monthly."


def _one_object_a_line(raw: str) -> list[dict]:
    assert "\u2028" not in raw and "\u2029" not in raw
    rows = [json.loads(line) for line in raw.splitlines() if line.strip()]
    return rows


def test_stdio_answers_stay_one_line_each():
    body = json.dumps({"id": 1, "query": "who may terminate?", "chunks": [TEXT, "The supplier delivers."]},
                      ensure_ascii=False)
    out = io.BytesIO()
    assert serve_stdio(SelectService(), io.BytesIO((body + "\n" + body + "\n").encode()), out) == 2
    rows = _one_object_a_line(out.getvalue().decode("utf-8"))
    assert len(rows) == 2 and rows[0]["id"] == 1 and any(p["text"] == TEXT for p in rows[0]["passages"])


def test_select_jsonl_and_json_and_chunk_outputs_escape_them(tmp_path):
    chunks = tmp_path / "c.json"
    chunks.write_text(json.dumps([TEXT, "The supplier delivers."], ensure_ascii=False), encoding="utf-8")
    for fmt in ("jsonl", "json"):
        out = tmp_path / f"out.{fmt}"
        result = CliRunner().invoke(main, ["select", "--chunks", str(chunks), "-q", "who may terminate?",
                                           "--format", fmt, "-o", str(out)])
        assert result.exit_code == 0, result.output
        raw = out.read_text(encoding="utf-8")
        if fmt == "jsonl":
            assert any(r["text"] == TEXT for r in _one_object_a_line(raw))
        else:
            assert "\u2028" not in raw and any(p["text"] == TEXT for p in json.loads(raw)["passages"])
    doc = tmp_path / "d.md"
    doc.write_text(TEXT, encoding="utf-8")
    chunked = CliRunner().invoke(main, ["chunk", str(doc), "--compact"])
    assert chunked.exit_code == 0 and "\u2028" not in chunked.output
    assert json.loads(chunked.output)["chunks"][0]["text"].startswith("Either party may terminate\u2028")


def test_the_index_chunk_store_keeps_one_record_a_line(tmp_path):
    index = LocalIndex.build(tmp_path / "ix", [SourceDocument("a", TEXT, {}, None)], HashingEncoder(), chunk_size=50)
    raw = (index.folder / "chunks.jsonl").read_text(encoding="utf-8")
    assert len(_one_object_a_line(raw)) == 1
    assert index.records([0])[0]["text"] == TEXT
