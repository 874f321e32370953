"""Concurrent adds of the same files: each reports what it wrote itself, not what the last writer wrote (M1)."""

from __future__ import annotations

from click.testing import CliRunner

from meteora_edge import HashingEncoder
from meteora_edge.cli import index_commands
from meteora_edge.cli.main import main
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex

ENC = HashingEncoder()
BASE = [SourceDocument("a", "Either party may terminate the agreement on notice.")]
NEW = [SourceDocument("b", "Fees are payable monthly in advance."), SourceDocument("c", "The deposit is returned.")]


def test_a_stale_add_of_documents_another_writer_added_writes_nothing_and_says_so(tmp_path):
    first = LocalIndex.build(tmp_path / "ix", BASE, ENC, chunk_size=4, overlap=0)
    stale = LocalIndex.load(tmp_path / "ix")
    grown = first.add(NEW, ENC)
    assert (grown.added_chunks, grown.added_documents) == (len(grown) - len(first), 2) and grown.added_chunks > 0
    again = stale.add(NEW, ENC)  # opened before the other add: it only learns under the lock
    assert (again.added_chunks, again.added_documents) == (0, 0)
    assert again.generation == grown.generation and len(again) == len(grown)


def test_a_partly_added_batch_counts_only_its_own_documents(tmp_path):
    first = LocalIndex.build(tmp_path / "ix", BASE, ENC, chunk_size=4, overlap=0)
    stale = LocalIndex.load(tmp_path / "ix")
    middle = first.add(NEW[:1], ENC)
    mixed = stale.add(NEW, ENC)
    assert mixed.added_documents == 1 and mixed.added_chunks == len(mixed) - len(middle) > 0
    assert {r["source"] for r in mixed.records(range(len(middle), len(mixed)))} == {"c"}


def test_loaded_and_built_versions_report_no_add(tmp_path):
    built = LocalIndex.build(tmp_path / "ix", BASE, ENC)
    assert (built.added_chunks, LocalIndex.load(tmp_path / "ix").added_chunks) == (0, 0)


def test_the_cli_reports_zero_when_another_writer_got_there_first(tmp_path, monkeypatch):
    LocalIndex.build(tmp_path / "ix", BASE, ENC, chunk_size=4, overlap=0)
    docs = tmp_path / "docs"
    docs.mkdir()
    for d in NEW:
        (docs / f"{d.source_id}.txt").write_text(d.text)
    stale = LocalIndex.load(tmp_path / "ix")  # what this command opened before the other writer finished
    other = CliRunner().invoke(main, ["index", "add", str(tmp_path / "ix"), str(docs)])
    assert other.exit_code == 0 and "added 0 chunks" not in other.output, other.output
    monkeypatch.setattr(index_commands, "open_index", lambda spec: stale)
    late = CliRunner().invoke(main, ["index", "add", str(tmp_path / "ix"), str(docs)])
    assert late.exit_code == 0, late.output
    assert "added 0 chunks; 2 documents already in the index were left out" in late.output, late.output
    assert len(LocalIndex.load(tmp_path / "ix")) == len(stale) + int(other.output.split("added ")[1].split()[0])
