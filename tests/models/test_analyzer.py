"""The lexical analyser: stems, stop words, Unicode word runs, CJK bigrams and its stored record."""

from __future__ import annotations

import pytest

from meteora_edge.errors import BundleError, LocalIndexError
from meteora_edge.models.analyzer import (
    ANALYZERS, DEFAULT_ANALYZER, ENGLISH, STOP_WORDS, UNICODE_WORDS, analyzer_from_record, analyzer_of,
)
from meteora_edge.models.bm25 import BM25Index


@pytest.mark.parametrize(("text", "terms"), [
    ("terminate terminated termination terminating", ["termin"] * 4),  # Snowball's English stems
    ("Notices, noticed, NOTICE", ["notic"] * 3),
    ("running runs ran", ["run", "run", "ran"]),
    ("How can the agreement be terminated?", ["agreement", "termin"]),  # how, can, the, be: stop words
    ("it is what it is", []),
])
def test_english_stems_and_drops_stop_words(text, terms):
    assert ENGLISH.tokens(text) == terms


def test_the_stop_words_are_the_usual_english_function_words_and_no_content_word():
    assert {"the", "a", "of", "and", "is", "be", "can", "will", "don", "t", "not"} <= STOP_WORDS
    assert not {"terminate", "agreement", "notice", "party", "days", "may"} & STOP_WORDS
    assert 140 <= len(STOP_WORDS) <= 200


@pytest.mark.parametrize(("text", "terms"), [
    ("Москва — столица России", ["москва", "столица", "россии"]),  # Cyrillic words, case-folded
    ("Η Αθήνα ΕΊΝΑΙ πόλις", ["η", "αθήνα", "είναι", "πόλισ"]),  # Greek: casefold turns final sigma into σ
    ("東京都に住む", ["東京", "京都", "都に", "に住", "住む"]),  # a CJK run: overlapping character bigrams
    ("東", ["東"]),  # a lone CJK character is its own term
    ("서울 특별시", ["서울", "특별", "별시"]),  # Hangul too
    ("Tokyo東京2020", ["tokyo", "東京", "2020"]),  # script changes split a run
    ("ﬁnance Ｔｅｒｍｉｎａｔｉｏｎ", ["financ", "termin"]),  # NFKC: ligature and full-width letters
    ("Straße STRASSE", ["strass", "strass"]),  # casefold: ß is ss
])
def test_unicode_text_is_searchable(text, terms):
    assert ENGLISH.tokens(text) == terms


def test_unicode_words_is_the_tokenisation_of_indexes_before_analysers():
    assert UNICODE_WORDS.tokens("How can the Agreement be TERMINATED? 東京都") == [
        "how", "can", "the", "agreement", "be", "terminated", "東京都"]


def test_bm25_over_texts_analyses_the_query_as_its_documents():
    texts = ["Either party may terminate on notice.", "Fees are payable monthly.", "The termination of the lease."]
    index = BM25Index.from_texts(texts)
    assert index.analyzer is DEFAULT_ANALYZER is ENGLISH
    ids, scores = index.search("How can the agreement be terminated?", 3)
    assert sorted(ids.tolist()) == [0, 2] and (scores > 0).all()  # "terminated" meets terminate and termination
    legacy = BM25Index.from_texts(texts, analyzer=UNICODE_WORDS)
    assert legacy.search("terminated", 3)[0].tolist() == []  # no stemming: no match
    assert legacy.search("the", 3)[0].tolist() == [2]  # and "the" carries weight
    grown = index.extend_texts(["Terminated contracts end."])
    assert grown.analyzer is ENGLISH and 3 in grown.search("terminate", 4)[0].tolist()


@pytest.mark.parametrize("analyzer", list(ANALYZERS.values()), ids=list(ANALYZERS))
def test_a_record_names_its_analyser_exactly(analyzer):
    record = analyzer.record()
    assert record["name"] == analyzer.name and record["version"] == analyzer.version
    assert analyzer_from_record(dict(record), where="index x", error=LocalIndexError) is analyzer


@pytest.mark.parametrize("record", [
    {**ENGLISH.record(), "version": 2},  # a newer version of a known name
    {**ENGLISH.record(), "stemmer": "none"},  # a known name with other settings
    {"name": "icu-thai", "version": 1},
    "english",
    None,
])
def test_an_unknown_analyser_is_refused_in_one_line(record):
    with pytest.raises(BundleError) as info:
        analyzer_from_record(record, where="bundle b", error=BundleError)
    message = str(info.value)
    assert "\n" not in message and message.startswith("bundle b was built with the lexical analyser")
    assert "does not know" in message and "english v1" in message


def test_the_analyser_of_the_first_source_that_has_one():
    class WithLegacy:
        analyzer = UNICODE_WORDS

    assert analyzer_of(None, object()) is ENGLISH
    assert analyzer_of(None, WithLegacy()) is UNICODE_WORDS
    assert analyzer_of(WithLegacy(), object()) is UNICODE_WORDS
