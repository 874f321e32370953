"""``index sync|remove`` and ``index add`` of a changed file on a ``milvus://`` collection (Milvus Lite in a
tmp folder, a tiny ONNX bundle), and a one-line error for every bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")
pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from tiny_onnx import make_bundle  # noqa: E402

from meteora_edge.cli.main import main  # noqa: E402


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def _texts(url: str, bundle) -> str:
    result = run("index", "search", url, "-q", "days notice agreement", "-k", "10", "--json", "--bundle", bundle)
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
    db = tmp_path / "notes.db"
    built = run("index", "build", folder, "--backend", "milvus", "--uri", db, "--bundle", bundle, "--chunk-size", "20")
    assert built.exit_code == 0, built.output
    return folder, f"milvus://{db}", bundle


def test_sync_add_and_remove_follow_the_files(notes):
    folder, url, bundle = notes
    (folder / "terms.md").write_text("either party may terminate the agreement on fourteen days notice")
    (folder / "goods.md").unlink()
    (folder / "plan.md").write_text("ship the release in may")
    synced = run("index", "sync", url, folder)  # the bundle the build recorded
    assert synced.exit_code == 0, synced.output
    assert f"synced {url}: added 2 chunks, removed 2 chunks; now holds 3 chunks" in synced.output
    texts = _texts(url, bundle)
    assert "fourteen" in texts and "ninety" not in texts and "goods" not in texts
    again = run("index", "sync", url, folder, "--bundle", bundle)
    assert "added 0 chunks, removed 0 chunks; now holds 3 chunks" in again.output
    (folder / "terms.md").write_text("either party may terminate the agreement on seven days notice")
    added = run("index", "add", url, folder / "terms.md")
    assert added.exit_code == 0 and "added 1 chunk, replacing 1 chunk of changed files" in added.output, added.output
    assert "fourteen" not in _texts(url, bundle)
    same = run("index", "add", url, folder / "terms.md", "--bundle", bundle)
    assert "added 0 chunks; 1 document already in the index was left out" in same.output
    removed = run("index", "remove", url, folder / "fees.md")
    assert removed.exit_code == 0 and f"removed 1 chunks from {url}; it now holds 2" in removed.output
    info = json.loads(run("index", "info", url).output)
    assert info["chunks"] == 2 and info["sources"] == 2 and info["format_version"] == 2


@pytest.mark.parametrize("args, message", [
    (["index", "remove", "URL", "NOTES/fees.md", "NOTES/nope.md"], "nope.md is not a source of collection"),
    (["index", "remove", "URL", "NOTES"], "this would delete every chunk of collection"),
    (["index", "sync", "URL", "TMP/nowhere"], "file not found: "),
    (["index", "sync", "milvus://TMP/missing.db", "NOTES"], "missing.db does not exist; build one with"),
    (["index", "remove", "milvus://TMP/missing.db", "x.md"], "missing.db does not exist; build one with"),
    (["index", "sync", "URL?collection=other", "NOTES"], "no collection 'other'"),
    (["index", "remove", "milvus://nowhere", "x.md"], "names neither a Milvus Lite database"),
    (["index", "compact", "URL"], "Milvus compacts a collection's segments itself"),
    (["index", "sync", "URL", "NOTES", "--bundle", "TMP/no-bundle"], "no-bundle"),
])
def test_bad_inputs_are_one_line_and_change_nothing(notes, tmp_path, args, message):
    folder, url, bundle = notes
    mapping = {"URL": url, "NOTES": str(folder), "TMP": str(tmp_path)}
    argv = []
    for arg in args:
        for key, value in mapping.items():
            arg = arg.replace(key, value) if arg.startswith((key, f"milvus://{key}")) else arg
        argv.append(arg)
    if args[1] == "sync" and "--bundle" not in args:
        argv += ["--bundle", str(bundle)]
    result = run(*argv)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "missing.db").exists()  # a missing database is never created
    info = json.loads(run("index", "info", url).output)
    assert info["chunks"] == 3 and info["sources"] == 3
