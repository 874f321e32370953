"""PipelineConfig validation at its bounds, its JSON form, and the settings select runs with."""

from __future__ import annotations

import json

import pytest

from meteora_edge import ConfigError, PipelineConfig
from meteora_edge.pipeline.config import is_ordered_document, select_config

# each setting just inside and just outside its range; the message names the setting, the range and the value
BOUNDS = [
    ("k_init", 1, 0, "k_init must be an integer >= 1, got 0"),
    ("lexical_weight", 0.0, -0.5, "lexical_weight must be a number in [0.0, 1000000.0], got -0.5"),
    ("lexical_weight", 1e6, 1e6 + 1, "lexical_weight must be a number in [0.0, 1000000.0], got 1000001.0"),
    ("elbow_z_threshold", -100.0, -100.5, "elbow_z_threshold must be a number in [-100.0, 100.0], got -100.5"),
    ("elbow_z_threshold", 100.0, 101, "elbow_z_threshold must be a number in [-100.0, 100.0], got 101"),
    ("pooled_z", -100, -101, "pooled_z must be a number in [-100.0, 100.0], got -101"),
    ("pooled_z", 100, 100.5, "pooled_z must be a number in [-100.0, 100.0], got 100.5"),
    ("llm_pool", 1, 0, "llm_pool must be an integer >= 1 or None, got 0"),
    ("llm_weight", 0.0, -0.1, "llm_weight must be a number in [0.0, 1000000.0], got -0.1"),
    ("llm_weight", 1e6, 1e6 + 1, "llm_weight must be a number in [0.0, 1000000.0], got 1000001.0"),
    ("llm_z", -100.0, -100.5, "llm_z must be a number in [-100.0, 100.0], got -100.5"),
    ("llm_z", 100, 100.5, "llm_z must be a number in [-100.0, 100.0], got 100.5"),
    ("verification_batch", 1, 0, "verification_batch must be an integer >= 1, got 0"),
    ("tau_relevance", -1.0, -1.01, "tau_relevance must be a number in [-1.0, 1.0] or None, got -1.01"),
    ("tau_relevance", 1.0, 1.5, "tau_relevance must be a number in [-1.0, 1.0] or None, got 1.5"),
    ("n_min", 0, -1, "n_min must be an integer >= 0 or None, got -1"),
    ("theta_redundancy", -1.0, -1.5, "theta_redundancy must be a number in [-1.0, 1.0] or None, got -1.5"),
    ("theta_redundancy", 1, 1.01, "theta_redundancy must be a number in [-1.0, 1.0] or None, got 1.01"),
    ("t_max", 1, 0, "t_max must be an integer >= 1 or None, got 0"),
    ("expansion_window", 0, -1, "expansion_window must be an integer >= 0, got -1"),
    ("max_candidates", 1, 0, "max_candidates must be an integer >= 1, got 0"),
    ("max_chunk_chars", 1, 0, "max_chunk_chars must be an integer >= 1, got 0"),
    ("max_rationales", 1, 0, "max_rationales must be an integer >= 1, got 0"),
]


@pytest.mark.parametrize(("name", "inside", "outside", "message"), BOUNDS, ids=[f"{b[0]}={b[2]}" for b in BOUNDS])
def test_each_setting_is_checked_at_its_bounds(name, inside, outside, message):
    assert getattr(PipelineConfig(**{name: inside}), name) == inside
    with pytest.raises(ConfigError) as info:
        PipelineConfig(**{name: outside})
    assert str(info.value) == message


@pytest.mark.parametrize(("name", "value"), [
    ("k_init", True), ("k_init", 2.0), ("k_init", None), ("max_candidates", None), ("t_max", 1.5), ("n_min", False),
    ("lexical_weight", True), ("lexical_weight", "1"), ("lexical_weight", None), ("pooled_z", None),
    ("theta_redundancy", "0.5"), ("tau_relevance", "0.4"), ("expansion_window", True),
])
def test_wrong_types_are_refused(name, value):
    with pytest.raises(ConfigError, match=f"^{name} must be"):
        PipelineConfig(**{name: value})


@pytest.mark.parametrize(("name", "value", "message"), [
    ("scoring", "semantic", "scoring must be one of dense, lexical, hybrid, got 'semantic'"),
    ("pooled_cut", "knee", "pooled_cut must be one of auto, elbow, zscore, robust, got 'knee'"),
    ("rationales", "llm", "rationales must be one of auto, query, llm+auto, got 'llm'"),
    ("use_ecse", 1, "use_ecse must be true or false, got 1"),
    ("verification", "magic", "verification must be one of auto, llm, cross-encoder, cosine, none, got 'magic'"),
    ("oversize", "squeeze", "oversize must be 'drop' or 'truncate', got 'squeeze'"),
])
def test_choices_name_every_allowed_value(name, value, message):
    with pytest.raises(ConfigError) as info:
        PipelineConfig(**{name: value})
    assert str(info.value) == message


@pytest.mark.parametrize(("scoring", "cut", "effective"), [
    ("dense", "auto", "elbow"), ("hybrid", "auto", "zscore"), ("lexical", "auto", "zscore"), ("dense", "zscore", "zscore"),
])
def test_auto_pooled_cut_follows_the_scoring(scoring, cut, effective):
    assert PipelineConfig(scoring=scoring, pooled_cut=cut).effective_pooled_cut == effective


def test_json_form_has_sorted_keys_and_from_dict_refuses_non_objects():
    cfg = PipelineConfig(k_init=7, theta_redundancy=None)
    assert list(json.loads(cfg.to_json())) == sorted(cfg.to_dict())
    assert PipelineConfig.from_dict(json.loads(cfg.to_json())) == cfg
    with pytest.raises(ConfigError) as info:
        PipelineConfig.from_dict([("k_init", 7)])  # type: ignore[arg-type]
    assert str(info.value) == "pipeline config must be an object, got list"


def _chunk(start, end, **extra):
    return {"text": "x", "start_pos": start, "end_pos": end, **extra}


@pytest.mark.parametrize(("chunks", "ordered"), [
    ([_chunk(0, 5), _chunk(4, 9)], True),                                    # two are enough
    ([_chunk(0, 5), _chunk(0, 5)], True),                                    # equal offsets do not go backwards
    ([_chunk(0, 5), _chunk(3, 4)], False),                                   # the end goes backwards
    ([_chunk(4, 9), _chunk(0, 10)], False),                                  # the start goes backwards
    ([_chunk(0, 5), _chunk(6, 9), _chunk(2, 12)], False),                    # only the last step goes backwards
    ([{"text": "a", "start": 0, "end": 3}, {"text": "b", "start": 2, "end": 6}], True),  # start/end spellings
    ([_chunk(0, 5, source="a"), _chunk(6, 9, metadata={"source": "a"})], True),        # the metadata's source
    ([_chunk(0, 5, source="a"), _chunk(6, 9, metadata={"source": "b"})], False),
    ([_chunk(0, 5, source="a"), _chunk(6, 9)], False),
    ([_chunk(0, 5, metadata="not an object"), _chunk(6, 9)], True),
    ([_chunk(0, 5)], False),
    ([_chunk(0, 5), _chunk(True, 9)], False),
])
def test_is_ordered_document(chunks, ordered):
    assert is_ordered_document(chunks) is ordered


def test_select_config_for_an_index_starts_from_the_defaults():
    cfg = select_config({"k_init": None, "t_max": 100}, from_index=True, chunks=None)
    assert (cfg.k_init, cfg.n_min, cfg.theta_redundancy, cfg.t_max) == (50, 1, 0.85, 100)
    assert cfg.verification == "auto" and cfg.expansion_window == 0


def test_select_config_for_given_chunks_runs_only_the_phases_asked_for():
    chunks = [_chunk(0, 5), _chunk(4, 9)]
    cfg = select_config({"n_min": 2}, from_index=False, chunks=chunks)
    assert (cfg.n_min, cfg.theta_redundancy, cfg.t_max, cfg.verification) == (2, None, None, "none")
    assert cfg.expansion_window == 1  # one ordered document
    assert select_config({"tau_relevance": 0.3}, from_index=False, chunks=["a", "b"]).verification == "auto"
    assert select_config({"verification": "cosine"}, from_index=False, chunks=["a"]).verification == "cosine"
    assert select_config({"expansion_window": 3}, from_index=False, chunks=chunks).expansion_window == 3
