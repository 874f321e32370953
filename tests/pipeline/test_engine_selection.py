"""The selection phase of :class:`EvidencePipeline`: where the rationales come from, ECSE, its trace.

* rationales: given, a generator's (which sees the candidate texts), rule-written (``auto``), or
  both (``llm+auto``, the generator's joining the rule-written ones — none written leaves those
  alone; without a generator the same as ``auto``); ``max_rationales`` is inclusive and also
  bounds the rationales written by rule;
* ECSE runs with the config's settings, on the vectors the candidates phase computed, and marks
  each candidate selected or not with its ECSE score; what it keeps goes on best first;
* the phase record: summary and details, with ECSE off too, and after an LLM rerank.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from meteora_edge import EvidencePipeline, HashingEncoder, MeteoraSelector, PipelineConfig
from meteora_edge.errors import InputError
from meteora_edge.selection.rationales import Rationale

QUERY = "who may terminate the agreement"
PASSAGES = [
    "Either party may terminate the agreement on written notice.",
    "Fees are payable every month.",
    "The agreement is governed by the laws of England.",
    "A party may terminate for material breach.",
    "Rent is due on the first day of the month.",
    "Notices must be in writing.",
]
PASS_ALL = {"verification": "none", "n_min": None, "theta_redundancy": None, "t_max": None}
QUESTION_RATIONALE = {"index": 1, "label": "question", "text": QUERY, "flag_instructions": None}
COMPARISON = "Which was founded first, Acme Widgets or Borealis Shipping?"


def run(passages=PASSAGES, query=QUERY, *, given=None, generator=None, scorer=None, **config):
    """Run the pipeline with every later phase passing everything on; ``given``: the caller's rationales."""
    pipe = EvidencePipeline(PipelineConfig(**{**PASS_ALL, **config}), rationale_generator=generator,
                            relevance_scorer=scorer)
    return pipe.run(query, passages=passages, rationales=given)


class RecordingGenerator:
    """A METEORA-style generator ``(query, documents) -> text`` that keeps what it was shown."""

    def __init__(self, answer: str) -> None:
        self.answer, self.seen = answer, []

    def __call__(self, query, documents):
        self.seen.append((query, list(documents)))
        return self.answer


# -- where the rationales come from -----------------------------------------------------------------


def test_llm_plus_auto_without_a_generator_writes_the_rationales_by_rule():
    details = run(rationales="llm+auto").trace.phase("selection").details
    assert details["rationale_source"] == "auto"
    assert details["rationales"] == [QUESTION_RATIONALE]
    assert details["ecse"]["rationale_strategy"]["name"] == "auto"


@pytest.mark.parametrize("answer", ["", "   "])
def test_llm_plus_auto_with_a_generator_that_writes_nothing_keeps_only_the_rule_written_rationales(answer):
    generator = RecordingGenerator(answer)
    details = run(generator=generator, rationales="llm+auto").trace.phase("selection").details
    assert details["rationale_source"] == "llm+auto"
    assert details["rationales"] == [QUESTION_RATIONALE]
    assert "extra" not in details["ecse"]["rationale_strategy"]
    assert generator.seen == [(QUERY, PASSAGES)]


def test_llm_plus_auto_adds_the_generators_rationales_after_the_rule_written_ones():
    generator = RecordingGenerator("the right to end the contract early")
    details = run(generator=generator, rationales="llm+auto").trace.phase("selection").details
    assert details["rationale_source"] == "llm+auto"
    assert [r["text"] for r in details["rationales"]] == [QUERY, "the right to end the contract early"]
    assert details["ecse"]["rationale_strategy"]["extra"] == 1
    assert generator.seen == [(QUERY, PASSAGES)]


@pytest.mark.parametrize("strategy", ["auto", "query"])
def test_a_generator_is_shown_the_query_and_the_candidate_texts(strategy):
    generator = RecordingGenerator("termination rights")
    details = run(passages=[{"text": t} for t in PASSAGES], generator=generator,
                  rationales=strategy).trace.phase("selection").details
    assert generator.seen == [(QUERY, PASSAGES)]
    assert details["rationale_source"] == "generated"
    assert [r["text"] for r in details["rationales"]] == ["termination rights"]


def test_exactly_max_rationales_given_rationales_are_accepted_and_one_more_is_refused():
    given = ["termination rights", "notice period", "material breach"]
    ok = run(given=given, max_rationales=3).trace.phase("selection").details
    assert [r["text"] for r in ok["rationales"]] == given and ok["rationale_source"] == "given"
    with pytest.raises(InputError) as err:
        run(given=given, max_rationales=2)
    assert str(err.value) == "3 rationales, over max_rationales=2"


def test_max_rationales_also_bounds_the_rationales_written_by_rule():
    """A comparison of two names gets one rule-written rationale per name."""
    passages = ["Acme Widgets was founded in 1901.", "Borealis Shipping was founded in 1950.", "Rivers flood."]
    ok = run(passages, COMPARISON, max_rationales=2).trace.phase("selection").details
    assert [r["label"] for r in ok["rationales"]] == ["part", "part"]
    with pytest.raises(InputError) as err:
        run(passages, COMPARISON, max_rationales=1)
    assert str(err.value) == "2 rationales, over max_rationales=1"


# -- ECSE: its settings, its vectors, its verdict per candidate ------------------------------------


@pytest.mark.parametrize("settings", [
    {"scoring": "hybrid", "lexical_weight": 0.2},
    {"scoring": "hybrid", "pooled_cut": "elbow", "elbow_z_threshold": 0.3},
    {"scoring": "hybrid", "pooled_cut": "zscore", "pooled_z": 0.5},
    {"scoring": "dense", "elbow_z_threshold": 0.1, "expansion_window": 1},
], ids=["lexical-weight", "elbow", "pooled-z", "dense-elbow"])
def test_ecse_runs_with_the_configs_settings(settings):
    """The selection recorded in the trace is MeteoraSelector's with the same settings (and each
    setting here changes it: the selector's defaults would select otherwise)."""
    given = ["termination rights", "fees and rent"]
    result = run(given=given, **settings)
    ecse = result.trace.phase("selection").details["ecse"]
    window = settings.get("expansion_window", 0)
    defaults = PipelineConfig()
    settings = {"pooled_gap": defaults.pooled_gap, "cover_z": defaults.cover_z, "cover_lead": defaults.cover_lead,
                **settings}
    same = MeteoraSelector(HashingEncoder(), expansion_window=window,
                           **{k: v for k, v in settings.items() if k != "expansion_window"})
    expected = same.select(PASSAGES, given)
    assert ecse == expected.to_dict()["details"]
    default = MeteoraSelector(HashingEncoder(), expansion_window=window, scoring=settings["scoring"]).select(PASSAGES, given)
    assert ecse != default.to_dict()["details"]
    records = result.trace.candidates
    assert [r.selected for r in records] == [i in expected.selected_indices for i in range(len(PASSAGES))]
    assert [r.ecse_score for r in records] == pytest.approx(expected.scores().tolist(), abs=1e-12)


def test_what_ecse_keeps_goes_on_best_first_whatever_its_position():
    result = run(pooled_cut="zscore", pooled_z=0.0)
    records = result.trace.candidates
    kept = [r.candidate for r in records if r.selected]
    assert len(kept) >= 3
    best_first = sorted(kept, key=lambda i: -records[i].ecse_score)
    assert best_first != sorted(kept)
    assert result.trace.phase("verify").details["accepted"] == best_first
    assert result.ids == best_first


@pytest.mark.parametrize("rationales", [["termination rights"], None], ids=["given", "auto"])
def test_each_passage_is_embedded_once_per_run(table_encoder, rationales):
    """ECSE reuses the candidates' vectors: the encoder sees each passage once."""
    passages = ["alpha clause", "beta clause", "gamma clause"]
    vectors = {QUERY: [1.0, 0.0, 0.0], "termination rights": [0.9, 0.1, 0.0], "alpha clause": [1.0, 0.0, 0.0],
               "beta clause": [0.0, 1.0, 0.0], "gamma clause": [0.0, 0.0, 1.0]}
    encoder = table_encoder(vectors)
    pipe = EvidencePipeline(PipelineConfig(scoring="dense", **PASS_ALL), encoder=encoder)
    result = pipe.run(QUERY, passages=passages, rationales=rationales)
    assert result.ids[0] == 0
    seen = Counter(text for call in encoder.calls for text in call)
    assert [seen[p] for p in passages] == [1, 1, 1]


# -- the phase record ---------------------------------------------------------------------------------


def test_the_phase_summarises_what_ecse_kept_and_from_which_rationales():
    phase = run().trace.phase("selection")
    assert phase.summary == "ECSE kept 1 of 6 (1 auto rationales, hybrid scores)"
    assert phase.details["rationale_source"] == "auto" and phase.details["rationales"] == [QUESTION_RATIONALE]
    assert set(phase.details) == {"rationale_source", "rationales", "term_cover", "ecse"}


@pytest.mark.parametrize(("given", "strategy", "source", "recorded"), [
    (None, "auto", "auto", [QUESTION_RATIONALE]),
    (["termination rights"], "auto", "given",
     [{"index": 1, "label": None, "text": "termination rights", "flag_instructions": None}]),
    (None, "query", "query-fallback", [{**QUESTION_RATIONALE, "label": None}]),
])
def test_with_ecse_off_every_candidate_passes_on_and_the_phase_records_the_rationales(
        given, strategy, source, recorded):
    result = run(given=given, use_ecse=False, rationales=strategy)
    phase = result.trace.phase("selection")
    assert phase.summary == f"ECSE off; 6 candidates pass on ({source} rationales)"
    assert phase.details == {"rationale_source": source, "rationales": recorded, "ecse": False}
    assert result.trace.phase("verify").details["accepted"] == list(range(6))
    assert all(r.selected is None and r.ecse_score is None for r in result.trace.candidates)


def test_after_an_llm_rerank_the_summary_says_how_many_it_judged_and_kept():
    class KeywordScorer:
        def score(self, query, passages):
            return np.array([4.0 if "terminate" in p else 0.0 for p in passages])

    result = run(scorer=KeywordScorer(), llm_pool=4)
    phase = result.trace.phase("selection")
    rerank = phase.details["llm_rerank"]
    assert len(rerank["pool"]) == 4
    assert phase.summary == ("ECSE kept 1 of 6 (1 auto rationales, hybrid scores); "
                             f"LLM rerank of 4 kept {len(rerank['kept'])}")


def test_rationale_objects_keep_their_labels_in_the_trace():
    given = [Rationale("termination rights", 1, "part"), Rationale("notice", 2, None)]
    details = run(given=given).trace.phase("selection").details
    assert [(r["index"], r["label"], r["text"]) for r in details["rationales"]] == [
        (1, "part", "termination rights"), (2, None, "notice")]


# -- one BM25 over the candidates per run -----------------------------------------------------------


def test_one_bm25_index_over_the_passages_serves_every_phase_of_a_run(monkeypatch):
    """Candidate scores, ECSE's plan and selection and the fallback all read the same BM25 index."""
    from meteora_edge.models.bm25 import BM25Index

    builds = []
    original = BM25Index.from_texts

    def counting(texts, **kwargs):
        builds.append(list(texts))
        return original(builds[-1], **kwargs)

    monkeypatch.setattr(BM25Index, "from_texts", counting)
    pipe = EvidencePipeline(PipelineConfig(scoring="hybrid", rationales="auto", verification="cosine",
                                           tau_relevance=0.99, n_min=2, theta_redundancy=None, t_max=None))
    result = pipe.run("Who may terminate the agreement?", passages=PASSAGES)
    assert builds == [PASSAGES]
    assert result.trace.phase("selection").details["ecse"]["rationale_strategy"]["kind"] == "question"
    assert result.trace.phase("fallback").details["fired"] and result.trace.phase("fallback").details["scope"] == "candidates"
    lexical = original(PASSAGES, analyzer=pipe.analyzer).text_scores("Who may terminate the agreement?")
    assert [r.lexical_score for r in result.trace.candidates] == pytest.approx(lexical.tolist())
