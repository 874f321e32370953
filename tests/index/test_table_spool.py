"""A build's source table, spooled source by source, is byte for byte the table built in memory; when
a source's documents do not come together the build groups them in memory as before."""

import io

import pytest

from meteora_edge import HashingEncoder, LocalIndex
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.sources import encode_table
from meteora_edge.index.table_spool import TableSpool
from meteora_edge.index.updates import build_table


def _documents(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    a, b = str(tmp_path / "a.txt"), str(tmp_path / "gone.txt")
    return [
        SourceDocument("a#0", "Either party may terminate.", {"page": 1}, a),
        SourceDocument("a#1", "", {"page": 2}, a),  # no chunk: hashed with its source, no range
        SourceDocument("a#2", "Late fees accrue monthly.", {}, a),
        SourceDocument("z", "Zürich über alles.", {"n": 1.5}),
        SourceDocument("b#0", "Notice in writing.", {}, b),
        SourceDocument("stdin", "piped text here", {}, "<stdin>"),
        SourceDocument("empty", "", {}),  # a source without any chunk: no entry
        SourceDocument("c", "Fees are due.", {}),
    ]


def _spooled(tmp_path, documents, counts):
    with TableSpool(tmp_path) as spool:
        at = 0
        for document, n in zip(documents, counts):
            spool.add(document, at, at + n)
            at += n
        out = io.BytesIO()
        spool.write_to(out)
        return spool.grouped(), out.getvalue()


def test_grouped_documents_give_the_in_memory_table_bytes(tmp_path):
    documents = _documents(tmp_path)
    counts = [0 if not d.text else 2 for d in documents]
    grouped, data = _spooled(tmp_path, documents, counts)
    assert grouped
    assert data == encode_table(build_table(documents, counts).values())


def test_a_source_coming_back_is_not_grouped(tmp_path):
    documents = _documents(tmp_path)
    documents.append(documents[0])  # a.txt again, after other sources
    grouped, _ = _spooled(tmp_path, documents, [1] * len(documents))
    assert not grouped


@pytest.mark.parametrize("interleave", [False, True])
def test_a_build_stores_the_in_memory_table_either_way(tmp_path, interleave):
    documents = [d for d in _documents(tmp_path) if d.text]
    if interleave:
        documents = [documents[0], documents[2], documents[1], documents[3]] + documents[4:]  # a.txt, z, a.txt, …
    index = LocalIndex.build(tmp_path / "ix", documents, HashingEncoder(), chunk_size=2, overlap=0)
    per_source = {}
    for record in index.records(range(len(index))):
        per_source.setdefault(record["source"], 0)
        per_source[record["source"]] += 1
    counts = [per_source[d.source_id] for d in documents]
    assert (index.folder / "sources.json").read_bytes() == encode_table(build_table(documents, counts).values())
