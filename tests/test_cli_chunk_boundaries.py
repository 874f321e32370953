"""--boundaries text: `chunk` and `index build` end chunks at paragraph and sentence breaks (one chunker)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from meteora_edge.cli.main import main
from meteora_edge.index.local_index import LocalIndex

from repo_paths import EXAMPLES

CONTRACT = EXAMPLES / "corpus" / "contract.md"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_chunk_by_default_keeps_every_clause_whole_and_its_offsets(tmp_path):
    text = CONTRACT.read_text(encoding="utf-8")
    result = run("chunk", str(CONTRACT), "--chunk-size", "60", "-o", str(tmp_path / "c.json"))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "c.json").read_text())
    chunks = data["chunks"] if isinstance(data, dict) else data
    clauses = [p for p in text.split("\n\n") if p.strip()]
    for chunk in chunks:
        assert text[chunk["start_pos"]:chunk["end_pos"]] == chunk["text"] and len(chunk["text"].split()) <= 60
    # every clause lies inside one chunk, none is cut between two
    assert all(any(c.strip() in chunk["text"] for chunk in chunks) for c in clauses)
    words = run("chunk", str(CONTRACT), "--chunk-size", "60", "--boundaries", "words", "-o", str(tmp_path / "w.json"))
    assert words.exit_code == 0, words.output
    windows = json.loads((tmp_path / "w.json").read_text())
    windows = windows["chunks"] if isinstance(windows, dict) else windows
    assert not all(any(c.strip() in w["text"] for w in windows) for c in clauses)  # fixed windows cut some


def test_index_build_records_its_boundaries_and_refuses_an_unknown_one(tmp_path):
    built = run("index", "build", str(CONTRACT), "--out", str(tmp_path / "ix"))
    assert built.exit_code == 0, built.output
    assert LocalIndex.load(tmp_path / "ix").manifest["chunking"]["boundaries"] == "text"  # the default
    words = run("index", "build", str(CONTRACT), "--out", str(tmp_path / "w"), "--boundaries", "words")
    assert words.exit_code == 0, words.output
    assert LocalIndex.load(tmp_path / "w").manifest["chunking"]["boundaries"] == "words"
    bad = run("index", "build", str(CONTRACT), "--out", str(tmp_path / "bad"), "--boundaries", "lines")
    assert bad.exit_code == 2 and "'lines' is not one of 'text', 'words'" in bad.output
    assert not Path(tmp_path / "bad").exists()
