"""``index sync|remove|compact`` and ``index add`` of a changed file, through the CLI (a tiny ONNX bundle)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import make_bundle  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def _hits(index, query):
    result = run("index", "search", str(index), "-q", query, "-k", "10", "--json")
    assert result.exit_code == 0, result.output
    return " ".join(h["text"] for h in json.loads(result.output[result.output.index("{"):])["hits"])


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "terms.md").write_text("either party may terminate the agreement on ninety (90) days notice")
    (folder / "fees.md").write_text("fees are due monthly")
    (folder / "goods.md").write_text("the supplier shall deliver the goods")
    bundle = make_bundle(tmp_path / "bundle")
    out = folder / "ix"  # inside the folder it indexes
    built = run("index", "build", str(folder), "--out", str(out), "--bundle", str(bundle), "--chunk-size", "20")
    assert built.exit_code == 0, built.output
    return folder, out, bundle


def test_an_index_inside_its_input_never_indexes_itself(notes):
    folder, out, bundle = notes
    for _ in range(2):
        again = run("index", "build", str(folder), "--out", str(out), "--bundle", str(bundle), "--overwrite")
        assert again.exit_code == 0 and "indexed 3 documents from 3 files" in again.output, again.output
        assert "a meteora-edge index folder (index folders are never read as input)" in again.output
    assert json.loads(run("index", "info", str(out)).output)["documents"] == 3


def test_sync_and_add_drop_the_stale_text(notes):
    folder, out, _ = notes
    (folder / "terms.md").write_text("either party may terminate the agreement on fourteen days notice")
    (folder / "goods.md").unlink()
    synced = run("index", "sync", str(out), str(folder))
    assert synced.exit_code == 0 and "added 1 chunk, removed 2 chunks; now holds 2 chunks" in synced.output, synced.output
    hits = _hits(out, "how many days notice")
    assert "fourteen" in hits and "ninety" not in hits and "goods" not in hits
    (folder / "terms.md").write_text("either party may terminate the agreement on seven days notice")
    added = run("index", "add", str(out), str(folder / "terms.md"))
    assert added.exit_code == 0 and "added 1 chunk, replacing 1 chunk of changed files" in added.output
    assert "fourteen" not in _hits(out, "days notice")
    same = run("index", "add", str(out), str(folder / "terms.md"))
    assert "added 0 chunks; 1 document already in the index was left out" in same.output


def test_remove_and_compact(notes):
    folder, out, _ = notes
    removed = run("index", "remove", str(out), str(folder / "fees.md"))
    assert removed.exit_code == 0 and "removed 1 chunks" in removed.output and "now holds 2" in removed.output
    missing = run("index", "remove", str(out), str(folder / "fees.md"))
    assert missing.exit_code == 1 and missing.output.strip().splitlines() == [
        f"Error: {folder / 'fees.md'} is not a source of the index at {out} (nothing was removed)"]
    compacted = run("index", "compact", str(out))
    assert compacted.exit_code == 0 and "2 chunks in one segment" in compacted.output
    info = json.loads(run("index", "info", str(out)).output)
    assert info["segments"] == {"base": 2, "delta": 0, "deleted": 0} and info["sources"] == 2
