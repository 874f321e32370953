"""ECSE edges: the scoring/cut defaults, a zero lexical weight, the lexical scores in a
result's dict, rationales appended to a rule-written plan, no chunks for select_auto, and
standardising a constant row without a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from meteora_edge import HashingEncoder, MeteoraSelector, Rationale
from meteora_edge.errors import InputError
from meteora_edge.selection.ecse import AutoPlan, SelectionResult, check_scoring
from meteora_edge.selection.stages import standardise


def test_the_pooled_cut_defaults_to_auto_which_follows_the_scoring():
    assert check_scoring("dense") == ("dense", "elbow")
    assert check_scoring("hybrid") == ("hybrid", "zscore")
    assert check_scoring("lexical") == ("lexical", "zscore")


def test_a_lexical_weight_of_zero_is_allowed_and_kept():
    selector = MeteoraSelector(HashingEncoder(), scoring="hybrid", lexical_weight=0)
    assert selector.lexical_weight == 0.0 and isinstance(selector.lexical_weight, float)


def test_lexical_scores_are_rounded_to_six_places_in_the_dict():
    result = SelectionResult([0], ["a"], [Rationale("a")], [0], [], [], None, [], [0.5], [0.5],
                             dense_scores=[0.123456789], lexical_scores=[1.23456789, 2.0])
    details = result.to_dict()["details"]
    assert details["dense_scores"] == [0.123457] and details["lexical_scores"] == [1.234568, 2.0]


def test_extra_rationales_are_numbered_after_the_plans_and_keep_their_parts():
    plan = AutoPlan([Rationale("who directed it", 1, "Film"), Rationale("where was he born", 2)], {"kind": "bridge"},
                    "Ed Wood is a 1994 film.", (1,))
    extended = plan.extended([Rationale("his nationality", 7, "Person", "reject fan pages"), Rationale("his age", 3)])
    assert [(r.index, r.text) for r in extended.rationales] == [
        (1, "who directed it"), (2, "where was he born"), (3, "his nationality"), (4, "his age")]
    assert extended.rationales[2] == Rationale("his nationality", 3, "Person", "reject fan pages")
    assert extended.strategy == {"kind": "bridge", "extra": 2} and plan.strategy == {"kind": "bridge"}
    assert extended.first_hop_text == "Ed Wood is a 1994 film." and extended.exclude_rows == (1,)
    assert extended.second_hop == Rationale("where was he born", 2)


class RefusesEmpty:
    """An encoder that, like a real model, fails on an empty batch."""

    def __init__(self):
        self.calls = []

    def encode(self, texts):
        self.calls.append(list(texts))
        if not texts:
            raise ValueError("empty batch")
        return HashingEncoder().encode(texts)


def test_select_auto_without_chunks_says_so_before_embedding_anything():
    encoder = RefusesEmpty()
    with pytest.raises(InputError) as error:
        MeteoraSelector(encoder).select_auto([], "Who directed Ed Wood?")
    assert str(error.value) == "no chunks to select from; give at least one chunk"
    assert encoder.calls == []


def test_a_constant_row_standardises_to_zeros_without_a_warning():
    tiny = 0.1 * 2.0**-500  # its mean is off by rounding while its spread underflows to 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = standardise(np.array([[tiny, tiny, tiny], [1.0, 2.0, 3.0]]))
    assert out[0].tolist() == [0.0, 0.0, 0.0]
    assert np.allclose(out[1], [-1.224745, 0.0, 1.224745])
