"""The robust cut of ECSE's pooled scores: the median and scaled MAD of the candidates as the yardstick."""

import numpy as np
import pytest

from meteora_edge import ConfigError, MeteoraSelector
from meteora_edge.pipeline.config import PipelineConfig
from meteora_edge.selection.stages import robust_cut, robust_z, zscore_cut

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # the numeric core never warns


def _profile(winners: int, n: int = 40, seed: int = 0) -> np.ndarray:
    """``winners`` clear winners near 0.8 over near-misses and noise near 0.3."""
    rng = np.random.default_rng(seed)
    return np.concatenate([0.8 + 0.03 * rng.standard_normal(winners), 0.3 + 0.05 * rng.standard_normal(n - winners)])


@pytest.mark.parametrize("winners", [1, 3, 6, 12])
def test_the_robust_cut_keeps_as_many_as_stand_out(winners):
    for seed in range(5):
        scores = _profile(winners, seed=seed)
        kept = robust_cut(robust_z(scores), z_threshold=4.0, top_band=0.5)
        assert sorted(kept.tolist()) == list(range(winners)), (seed, kept)
        assert [scores[i] for i in kept] == sorted(scores[kept], reverse=True)  # best first


def test_many_winners_do_not_lift_the_yardstick_as_they_lift_the_mean_and_spread():
    scores = _profile(12)  # 30 % of the candidates are winners
    assert len(zscore_cut(scores, 2.0)) == 0  # they lift the mean and the spread: none is 2 sd above
    assert robust_z(scores)[:12].min() > 4.0  # measured against the bulk, every one stands out


def test_when_nothing_stands_out_the_best_and_its_close_neighbours_are_kept():
    scores = np.linspace(1.0, 0.0, 41)  # evenly spread: no outlier
    kept = robust_cut(robust_z(scores), z_threshold=4.0, top_band=0.5)
    z = robust_z(scores)
    assert kept[0] == 0 and set(kept.tolist()) == set(np.flatnonzero(z >= z[0] - 0.5).tolist())
    assert 1 < len(kept) < 10


@pytest.mark.parametrize("scores, expected", [
    ([], []),
    ([0.7], [0]),
    ([0.4, 0.4, 0.4], [0, 1, 2]),  # constant: all stand with the best
    ([0.2, 0.2, 0.2, 0.2, 0.9], [4]),  # MAD 0: the standard deviation is the unit
])
def test_small_and_degenerate_profiles(scores, expected):
    assert robust_cut(robust_z(np.array(scores)), z_threshold=4.0, top_band=0.5).tolist() == expected
    assert np.isfinite(robust_z(np.array(scores))).all()


def _encoder(vectors):
    return lambda texts: np.array([vectors[t] for t in texts], dtype=np.float32)


def test_the_selector_records_the_cut_and_the_pairing_band_drops_a_pair_the_question_rates_low():
    texts = [f"chunk {i}" for i in range(30)]
    rng = np.random.default_rng(3)
    vectors = {t: rng.standard_normal(16) for t in texts}
    for name in ("main", "again", "more"):
        vectors[name] = vectors["chunk 0"] + 0.1 * rng.standard_normal(16)
    vectors["aside"] = vectors["chunk 7"]  # a rationale whose best chunk the question as a whole rates low
    rationales = ["main", "again", "more", "aside"]
    plain = MeteoraSelector(_encoder(vectors), scoring="dense", pooled_cut="robust").select(texts, rationales)
    banded = MeteoraSelector(_encoder(vectors), scoring="dense", pooled_cut="robust",
                             pairing_band=0.5).select(texts, rationales)
    assert 7 in plain.pairing_indices and 7 in plain.selected_indices  # METEORA: every rationale's best joins
    cut = banded.to_dict()["details"]["cut"]
    assert cut["rule"] == "robust" and "7" in cut["pairs_dropped"] and 7 not in banded.selected_indices
    assert 0 in banded.selected_indices and cut["with_best"][0] == 0


@pytest.mark.parametrize("settings, message", [
    ({"top_band": -1}, "top_band must be"),
    ({"pairing_band": -0.5}, "pairing_band must be"),
    ({"robust_z": float("nan")}, "robust_z must be"),
])
def test_bad_robust_settings_are_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        MeteoraSelector(lambda texts: np.ones((len(texts), 2)), **settings)
    with pytest.raises(ConfigError, match=message):
        PipelineConfig(**settings)
