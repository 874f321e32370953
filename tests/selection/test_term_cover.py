"""The term cover: ECSE keeps the chunks that hold the rationale terms no kept chunk holds yet."""

import numpy as np
import pytest

from meteora_edge import ConfigError, MeteoraSelector
from meteora_edge.models.analyzer import UNICODE_WORDS
from meteora_edge.pipeline.config import PipelineConfig, select_config
from meteora_edge.selection.stages import term_cover

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _facts(winners: int, n: int = 25, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """``winners`` facts scoring alike (near 0.8, none leading) over noise near 0.3; fact i alone holds term i,
    and one more term is held by every chunk (it tells nothing apart)."""
    rng = np.random.default_rng(seed)
    scores = np.concatenate([0.8 + 0.01 * rng.standard_normal(winners), 0.3 + 0.05 * rng.standard_normal(n - winners)])
    holders = [np.array([i]) for i in range(winners)] + [np.arange(n)]
    return scores, holders


@pytest.mark.parametrize("winners", [1, 3, 6])
def test_the_cover_keeps_as_many_facts_as_hold_the_question_s_terms(winners):
    """Only the best chunk is kept by the cut; the cover adds the other facts, however many, best first."""
    for seed in range(5):
        scores, holders = _facts(winners, seed=seed)
        best = int(np.argmax(scores))
        added = term_cover(scores, holders, [best], z_min=0.5, lead=0.5)
        assert sorted([best, *added]) == list(range(winners)), (seed, added)
        assert [scores[i] for i in added] == sorted(scores[added], reverse=True)


def test_one_chunk_that_leads_the_runner_up_answers_alone():
    scores, holders = _facts(3)
    scores[0] = 3.0  # leads the runner-up by far more than half a standard deviation
    assert term_cover(scores, holders, [0], z_min=0.5, lead=0.5) == []
    assert sorted(term_cover(scores, holders, [0], z_min=0.5, lead=99.0)) == [1, 2]


def test_the_walk_stops_below_z_min_and_skips_chunks_that_add_no_new_term():
    scores = np.array([0.9, 0.85, 0.8, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    holders = [np.array([0, 1]), np.array([2]), np.array([3])]  # term 0 is held by the kept chunk and by 1
    assert term_cover(scores, holders, [0], z_min=0.5, lead=0.5) == [2]  # 1 adds nothing; 3 is below z 0.5
    assert term_cover(scores, holders, [0], z_min=-1.0, lead=0.5) == [2, 3]


def test_the_thresholds_are_inclusive_and_two_chunks_are_enough_for_the_lead_test():
    scores = np.array([1.0, 1.0, -1.0, -1.0])  # standardised exactly: z = 1, 1, -1, -1
    holders = [np.array([1])]
    assert term_cover(scores, holders, [0], z_min=1.0, lead=0.5) == [1]  # z 1.0 is not below z_min 1.0
    assert term_cover(scores, holders, [0], z_min=1.0, lead=0.0) == []  # a lead of 0 >= 0: the best answers alone
    two = np.array([2.0, 0.0])  # z = 1, -1: the best leads by 2
    assert term_cover(two, [np.array([0])], [1], z_min=-5, lead=0.5) == []
    assert term_cover(two, [np.array([0])], [1], z_min=-5, lead=3.0) == [0]


def test_terms_held_by_no_chunk_or_by_most_chunks_are_left_out():
    scores = np.linspace(1.0, 0.0, 10)
    common = [np.arange(6)]  # 6 of 10 chunks: over the half
    assert term_cover(scores, [np.array([], dtype=np.int64), *common], [0], z_min=-9, lead=9) == []
    assert term_cover(scores, common, [0], z_min=-9, lead=9, max_share=0.7) == []  # already held by 0
    assert term_cover(scores, [np.arange(1, 7)], [0], z_min=-9, lead=9) == []  # 6 of 10 hold it: over the half
    assert term_cover(scores, [np.arange(1, 7)], [0], z_min=-9, lead=9, max_share=0.7) == [1]
    assert term_cover(scores, [np.arange(1, 6)], [0], z_min=-9, lead=9) == [1]  # 5 of 10: at the half


def test_the_selector_reports_what_the_cover_added_and_none_turns_it_off():
    """Three facts each name one part of the question; the cut keeps one, the cover the other two."""
    chunks = ["The Zeta pump moves water.", "The pump needs Omega oil.", "Its seeds come from Kappa.",
              *[f"Unrelated note number {i} about lunch." for i in range(12)]]
    vectors = {c: np.eye(16)[i] for i, c in enumerate(chunks)}
    rationale = "Zeta Omega Kappa"
    vectors[rationale] = np.eye(16)[0] * 3 + np.eye(16)[1] * 2.9 + np.eye(16)[2] * 2.8

    def encoder(texts):
        return np.array([vectors[t] for t in texts], dtype=np.float32)

    common = {"scoring": "hybrid", "expansion_window": 0, "pooled_z": 99.0, "analyzer": UNICODE_WORDS}
    off = MeteoraSelector(encoder, **common).select(chunks, [rationale])
    on = MeteoraSelector(encoder, cover_z=0.5, cover_lead=0.5, **common).select(chunks, [rationale])
    assert len(off.selected_indices) == 1
    assert on.selected_indices == [0, 1, 2]
    assert sorted(on.cut["covering"] + off.selected_indices) == [0, 1, 2]
    assert on.chosen_by() == {p: "term cover" if p in on.cut["covering"] else "pair" for p in (0, 1, 2)}
    assert on.to_dict()["details"]["cut"]["cover_lead"] == 0.5
    with pytest.raises(ConfigError, match="cover_lead must be >= 0"):
        MeteoraSelector(encoder, cover_lead=-1)
    with pytest.raises(ConfigError, match="cover_z must be a finite number"):
        MeteoraSelector(encoder, cover_z=float("nan"))


def test_the_pipeline_covers_by_default_and_a_request_can_turn_it_off():
    assert PipelineConfig().cover_z == 0.5
    assert select_config({"cover_z": None}, from_index=True, chunks=None).cover_z is None
    assert select_config({"t_max": None}, from_index=True, chunks=None).cover_z == 0.5
    with pytest.raises(ConfigError, match="cover_lead must be a number"):
        PipelineConfig(cover_lead=-0.5)
