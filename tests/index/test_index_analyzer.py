"""An index records its lexical analyser; a query is analysed as its index was, old indexes as before."""

from __future__ import annotations

import json

import pytest

from meteora_edge import HashingEncoder
from meteora_edge.errors import ConfigError, LocalIndexError
from meteora_edge.index.corpus import SourceDocument
from meteora_edge.index.local_index import LocalIndex
from meteora_edge.models.analyzer import ENGLISH, UNICODE_WORDS

ENC = HashingEncoder()
DOCS = [SourceDocument("a", "Either party may terminate this Agreement on ninety days notice."),
        SourceDocument("b", "The fees are payable monthly."),
        SourceDocument("c", "Москва — столица России. 東京都の条例。")]


def _manifest(index):
    return index.root / index.generation / "manifest.json"


def test_a_new_index_records_the_english_analyser_and_reads_it_back(tmp_path):
    built = LocalIndex.build(tmp_path / "ix", DOCS, ENC, chunk_size=50)
    assert json.loads(_manifest(built).read_text())["analyzer"] == ENGLISH.record()
    loaded = LocalIndex.load(tmp_path / "ix", encoder=ENC)
    assert loaded.analyzer is ENGLISH and loaded.bm25.analyzer is ENGLISH and loaded.info()["analyzer"] == ENGLISH.record()
    assert loaded.bm25_search("How can the agreement be terminated?", 3)[0].tolist() == [0]
    assert loaded.bm25_search("столицы москва", 3)[0].tolist() == [2]
    assert loaded.bm25_search("東京", 3)[0].tolist() == [2]
    assert loaded.bm25_search("the", 3)[0].tolist() == []  # a stop word finds nothing
    assert loaded.lexical_scores("terminated", [1, 0]).tolist()[0] == 0.0


def test_add_analyses_new_chunks_as_the_index_was_built(tmp_path):
    built = LocalIndex.build(tmp_path / "ix", DOCS[:2], ENC, chunk_size=50, analyzer=UNICODE_WORDS)
    grown = built.add([SourceDocument("d", "Termination happens on breach.")], ENC)
    assert grown.analyzer is UNICODE_WORDS and json.loads(_manifest(grown).read_text())["analyzer"] == UNICODE_WORDS.record()
    assert grown.bm25_search("termination", 3)[0].tolist() == [2]
    assert grown.bm25_search("terminate", 3)[0].tolist() == [0]  # no stemming in this index


def test_an_index_without_the_record_keeps_its_old_tokenisation(tmp_path):
    built = LocalIndex.build(tmp_path / "ix", DOCS, ENC, chunk_size=50, analyzer=UNICODE_WORDS)
    manifest = json.loads(_manifest(built).read_text())
    del manifest["analyzer"]
    _manifest(built).write_text(json.dumps(manifest))
    old = LocalIndex.load(tmp_path / "ix", encoder=ENC)
    assert old.analyzer is UNICODE_WORDS and old.bm25_search("terminated", 3)[0].tolist() == []
    assert old.bm25_search("terminate", 3)[0].tolist() == [0]
    grown = old.add([SourceDocument("d", "The end.")], ENC)
    assert "analyzer" not in grown.manifest and grown.analyzer is UNICODE_WORDS


@pytest.mark.parametrize("record", [{**ENGLISH.record(), "version": 9}, {"name": "klingon", "version": 1}])
def test_an_index_built_with_an_unknown_analyser_is_refused_in_one_line(tmp_path, record):
    built = LocalIndex.build(tmp_path / "ix", DOCS[:2], ENC, chunk_size=50)
    manifest = json.loads(_manifest(built).read_text())
    manifest["analyzer"] = record
    _manifest(built).write_text(json.dumps(manifest))
    with pytest.raises(LocalIndexError, match="was built with the lexical analyser .* does not know") as info:
        LocalIndex.load(tmp_path / "ix")
    assert "\n" not in str(info.value) and "rebuild it" in str(info.value)


@pytest.mark.parametrize("record", ["english", {"name": ["x"]}, {}])
def test_a_malformed_analyser_record_is_a_corrupt_manifest(tmp_path, record):
    built = LocalIndex.build(tmp_path / "ix", DOCS[:2], ENC, chunk_size=50)
    manifest = json.loads(_manifest(built).read_text())
    manifest["analyzer"] = record
    _manifest(built).write_text(json.dumps(manifest))
    with pytest.raises(LocalIndexError, match="manifest.analyzer"):
        LocalIndex.load(tmp_path / "ix")


def test_build_refuses_something_that_is_not_an_analyser(tmp_path):
    with pytest.raises(ConfigError, match="analyzer must be an Analyzer"):
        LocalIndex.build(tmp_path / "ix", DOCS, ENC, analyzer="english")
    assert not (tmp_path / "ix").exists()
