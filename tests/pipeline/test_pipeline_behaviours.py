"""Behaviours that deliberate bugs once broke without any test noticing.

* dedup keeps a chunk whose cosine to a kept one *equals* theta (strictly above is a duplicate);
* every run records the prioritise phase, with de-duplication on or off, in every rendering;
* the BM25 fallback over an index adds exactly the missing ``n_min - accepted`` chunks.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from meteora_edge import EvidencePipeline, InMemoryIndex, PipelineConfig
from meteora_edge.cli.main import main

PHASES = ["candidates", "selection", "verify", "fallback", "prioritise", "budget"]
QUERY = "who may terminate the agreement"


def _table_encoder(table_encoder, vectors: dict[str, list[float]]):
    return table_encoder({QUERY: [1.0, 0.0, 0.0], **vectors})


# -- dedup at theta exactly -----------------------------------------------------------------------

@pytest.mark.parametrize(("theta", "second"), [(1.0, [1.0, 0.0, 0.0]), (0.0, [0.0, 1.0, 0.0])],
                         ids=["identical-at-theta-1", "orthogonal-at-theta-0"])
def test_a_pair_with_cosine_exactly_theta_is_not_a_duplicate(table_encoder, theta, second):
    encoder = _table_encoder(table_encoder, {"first": [1.0, 0.0, 0.0], "second": second})
    config = PipelineConfig(use_ecse=False, verification="none", n_min=None, theta_redundancy=theta, t_max=None)
    result = EvidencePipeline(config, encoder=encoder).run(QUERY, passages=["first", "second"])
    assert sorted(result.passages) == ["first", "second"]
    assert result.trace.phase("prioritise").details["dropped"] == {}


def test_a_pair_just_above_theta_is_a_duplicate(table_encoder):
    encoder = _table_encoder(table_encoder, {"first": [1.0, 0.0, 0.0], "second": [1.0, 0.01, 0.0]})
    config = PipelineConfig(use_ecse=False, verification="none", n_min=None, theta_redundancy=0.99, t_max=None)
    result = EvidencePipeline(config, encoder=encoder).run(QUERY, passages=["first", "second"])
    assert result.passages == ["first"]
    assert result.trace.phase("prioritise").details["dropped"] == {"1": 0}


# -- the prioritise phase is always in the trace ------------------------------------------------

@pytest.mark.parametrize("theta", [0.85, None], ids=["dedup-on", "dedup-off"])
def test_every_run_records_the_prioritise_phase(theta):
    passages = ["Either party may terminate the agreement.", "Fees are due monthly.", "Either party may terminate it."]
    result = EvidencePipeline(PipelineConfig(theta_redundancy=theta, tau_relevance=0.0)).run(QUERY, passages=passages)
    assert [p.name for p in result.trace.phases] == PHASES
    assert [p["name"] for p in result.to_dict()["trace"]["phases"]] == PHASES
    assert "  prioritise " in result.trace.to_table()
    details = result.trace.phase("prioritise").details
    assert details["theta"] == theta


@pytest.mark.parametrize("theta", [[], ["--theta", "0.9"]], ids=["dedup-off", "dedup-on"])
def test_the_cli_shows_the_prioritise_phase(tmp_path, theta):
    chunks = tmp_path / "c.json"
    chunks.write_text(json.dumps(["Either party may terminate.", "Fees are due monthly.", "Notice is thirty days."]))
    select = ["select", "--chunks", str(chunks), "-q", QUERY, *theta]
    summary = json.loads(CliRunner().invoke(main, [*select, "--compact"]).stdout)
    assert [p["name"] for p in summary["phases"]] == PHASES
    full = json.loads(CliRunner().invoke(main, [*select, "--trace"]).stdout)
    assert [p["name"] for p in full["trace"]["phases"]] == PHASES
    table = CliRunner().invoke(main, [*select, "--format", "table"]).stdout
    assert "\nprioritise " in table


# -- the index-mode fallback is capped at what is missing -------------------------------------------

def test_the_index_fallback_adds_exactly_the_missing_chunks(table_encoder):
    """kNN brings one chunk (no query word), which passes verification. BM25 over the index
    ranks first a chunk the cosine rung refuses, then four it accepts. With n_min 3 the
    fallback must add exactly 2, although BM25 is asked for more and more than 2 would pass."""
    refused = "who may terminate the agreement: terminate, terminate, terminate"
    passing = [f"either party may terminate the agreement, case {i}" for i in range(4)]
    texts = ["clause seven covers insurance", refused, *passing]
    vectors = {texts[0]: [1.0, 0.0, 0.0], refused: [0.0, 1.0, 0.0], **{t: [0.8, 0.6, 0.0] for t in passing}}
    encoder = _table_encoder(table_encoder, vectors)
    index = InMemoryIndex(texts, encoder)
    config = PipelineConfig(k_init=1, scoring="dense", rationales="query", use_ecse=False, verification="cosine",
                            tau_relevance=0.5, n_min=3, theta_redundancy=None, t_max=None)
    result = EvidencePipeline(config, encoder=encoder, index=index).run(QUERY)
    fallback = result.trace.phase("fallback").details
    assert result.trace.phase("verify").details["accepted"] == [0]
    assert fallback["fired"] and fallback["refused"] == [1] and len(fallback["added"]) == 2
    assert len(result.ids) == 3 and result.ids[0] == 0 and set(result.ids[1:]) <= {2, 3, 4, 5}
    assert sum(c.via_fallback for c in result.trace.candidates) == 2
    assert sorted(str(c.chosen_by) for c in result.trace.candidates if c.kept) == ["None", "fallback", "fallback"]


def test_the_fallback_adds_nothing_when_enough_chunks_pass(table_encoder):
    texts = [f"either party may terminate, case {i}" for i in range(4)]
    encoder = _table_encoder(table_encoder, {t: [1.0, 0.0, 0.0] for t in texts})
    config = PipelineConfig(k_init=4, scoring="dense", rationales="query", use_ecse=False, verification="cosine",
                            tau_relevance=0.5, n_min=3, theta_redundancy=None, t_max=None)
    result = EvidencePipeline(config, encoder=encoder, index=InMemoryIndex(texts, encoder)).run(QUERY)
    assert not result.trace.phase("fallback").details["fired"] and len(result.ids) == 4
    assert np.all([not c.via_fallback for c in result.trace.candidates])
