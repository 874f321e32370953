"""`index info`'s report (LocalIndex.info): every field, its exact value, and how `index add` changes it."""

import json
from datetime import datetime

import pytest

from meteora_edge.index.generations import GENERATION_MARKER
from meteora_edge.models.analyzer import ENGLISH

from meteora_edge import HashingEncoder
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import INDEX_FORMAT_VERSION, LocalIndex

ENC = HashingEncoder()
DOCS = [
    SourceDocument("a", "Either party may terminate the agreement.", {}, "contracts/lease.txt"),
    SourceDocument("b", "Fees are payable monthly.", {}, "contracts/lease.txt"),
    SourceDocument("c", "The agreement is governed by English law.", {}, "contracts/terms.md"),
]


def _generation_bytes(root, generation):
    """What the generation's data files take on disk (everything but its own manifest)."""
    return sum(p.stat().st_size for p in (root / generation).iterdir()
               if p.name not in ("manifest.json", GENERATION_MARKER))


@pytest.fixture
def built(tmp_path):
    return LocalIndex.build(tmp_path / "ix", DOCS, ENC, chunk_size=4, overlap=1)


def test_info_reports_every_field_of_a_fresh_index(built, tmp_path):
    """The report holds exactly these fields, each with the value the index has on disk."""
    root = tmp_path / "ix"
    info = built.info()
    pointer = json.loads((root / "manifest.json").read_text())
    assert isinstance(info["created"], str) and isinstance(info["updated"], str)
    created, updated = datetime.fromisoformat(info["created"]), datetime.fromisoformat(info["updated"])
    assert created.tzinfo is not None and created <= updated
    assert info == {
        "path": str(root),
        "format_version": INDEX_FORMAT_VERSION,
        "generation": pointer["generation"],
        "chunks": len(built),
        "sources": 2,  # two files ...
        "documents": 3,  # ... holding three documents
        "segments": {"base": len(built), "delta": 0, "deleted": 0},
        "encoder": {"id": "hashing:384", "dimension": 384},
        "chunking": {"chunk_size": 4, "overlap": 1, "boundaries": "text"},
        # the distinct terms of the three texts: the english analyser's stems, stop words left out
        "bm25_terms": len({t for d in DOCS for t in ENGLISH.tokens(d.text)}),
        "analyzer": ENGLISH.record(),
        "lexical_scorer": "bm25",
        "sparse_model": None,
        "sparse_postings": None,
        "ann": None,
        "created": info["created"],
        "updated": info["updated"],
        "last_write": {"op": "build", "chunks": len(built)},
        "bytes": _generation_bytes(root, pointer["generation"]),
    }
    assert info["generation"] == built.generation and info["chunks"] > 3


def test_info_after_add_keeps_the_creation_date_and_reports_the_last_write(built, tmp_path):
    """`index add` keeps `created`, moves `updated` and `generation`, and reports itself as the last write."""
    before = built.info()
    grown = built.add([SourceDocument("d", "Notice must be given in writing.", {}, "contracts/notice.txt")], ENC)
    after = grown.info()
    assert after["created"] == before["created"]
    assert datetime.fromisoformat(after["updated"]) >= datetime.fromisoformat(before["updated"])
    assert after["generation"] != before["generation"] and after["generation"] == grown.generation
    assert after["last_write"] == {"op": "add", "chunks": len(grown) - len(built)}
    assert after["chunks"] == len(grown) and after["sources"] == 3 and after["documents"] == 4
    assert after["bytes"] == _generation_bytes(tmp_path / "ix", grown.generation) > before["bytes"]
    assert after["bm25_terms"] == len(grown.bm25.vocab) > before["bm25_terms"]
