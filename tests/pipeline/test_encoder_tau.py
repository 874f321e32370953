"""The cosine rung's threshold comes from the encoder; a threshold outside the score's range is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli_checks import one_line_error  # noqa: E402

from meteora_edge import EvidencePipeline, HashingEncoder, PipelineConfig  # noqa: E402
from meteora_edge.cli.main import main  # noqa: E402
from meteora_edge.errors import ConfigError  # noqa: E402
from meteora_edge.index.corpus import SourceDocument  # noqa: E402
from meteora_edge.index.local_index import LocalIndex  # noqa: E402
from meteora_edge.models.encoders import DEFAULT_COSINE_TAU, cosine_tau  # noqa: E402

DOCS = {
    "warehouse": "Our logistics hub sits beside the river port and handles most regional freight. The warehouse in "
                 "Rotterdam ships pallets of roasted coffee beans to cafes across the region every Tuesday morning, "
                 "and trucks return empty crates by Friday afternoon.",
    "library": "The town runs several community projects through its volunteer network each season. Volunteers at "
               "the public library repair donated bicycles in the basement workshop and give them to students who "
               "cycle to school across the river.",
    "orchestra": "The city orchestra plays about forty concerts a year in halls around the country. Before the winter "
                 "concert series it rehearses the new symphony in the old cathedral, where the acoustics suit the "
                 "choir and the brass section.",
    "dentist": "Good habits matter more than any product on the shelf, our clinic tells patients. The dentist "
               "recommends flossing once a day and replacing a toothbrush every three months, or sooner when the "
               "bristles fray.",
    "glacier": "Researchers have measured the ice in the northern valley since the nineteen sixties. The glaciers "
               "there retreat a few metres each summer as average temperatures rise, and meltwater lakes now fill "
               "the lower basin.",
}
QUESTIONS = {  # plain questions whose words appear in one document each
    "warehouse": "Which day are the coffee beans shipped from the warehouse?",
    "library": "Who repairs the donated bicycles?",
    "orchestra": "Where is the symphony rehearsed?",
    "dentist": "How often should a toothbrush be replaced?",
    "glacier": "Why are the glaciers retreating?",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("five") / "ix"
    return LocalIndex.build(root, [SourceDocument(k, v) for k, v in DOCS.items()], HashingEncoder())


def _sources(index, question, **settings):
    result = EvidencePipeline(PipelineConfig(**settings), index=index).run(question)
    return [d["source"] for d in result.documents], result


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_without_a_bundle_an_obvious_lexical_match_is_returned(index, name):
    sources, result = _sources(index, QUESTIONS[name])
    assert sources == [name]
    assert result.trace.phase("verify").details["tau"] == HashingEncoder.cosine_tau == 0.1


def test_minilm_s_threshold_would_reject_them(index):
    """The test above can fail: under the 0.35 set for MiniLM an obvious match is rejected (at 0.4, three were)."""
    kept = [_sources(index, q, tau_relevance=DEFAULT_COSINE_TAU)[0] for q in QUESTIONS.values()]
    assert sum(k == [] for k in kept) >= 1
    assert sum(_sources(index, q, tau_relevance=0.4)[0] == [] for q in QUESTIONS.values()) >= 2


def test_a_given_tau_replaces_the_encoder_s(index):
    sources, result = _sources(index, QUESTIONS["library"], tau_relevance=0.99)
    assert sources == [] and result.trace.phase("verify").details["tau"] == 0.99


def test_each_encoder_has_its_threshold():
    class Calibrated:
        cosine_tau = -0.25

    class Broken:
        cosine_tau = 3.0  # not a cosine: ignored

    assert cosine_tau(HashingEncoder()) == 0.1
    assert cosine_tau(Calibrated()) == -0.25
    assert cosine_tau(Broken()) == cosine_tau(object()) == DEFAULT_COSINE_TAU == 0.35


@pytest.mark.parametrize("tau", [-1.01, 1.01, float("nan"), float("inf")])
def test_a_tau_outside_the_cosine_s_range_is_refused(tau):
    with pytest.raises(ConfigError, match=r"tau_relevance must be a number in \[-1.0, 1.0\]"):
        PipelineConfig(tau_relevance=tau)


def test_a_negative_tau_is_refused_for_the_cross_encoder_s_probability():
    class Cross:
        def score(self, query, passages):
            return [0.5] * len(passages)

    with pytest.raises(ConfigError, match=r"outside the cross-encoder's score range \[0, 1\]"):
        EvidencePipeline(PipelineConfig(verification="cross-encoder", tau_relevance=-0.5), cross_encoder=Cross())
    EvidencePipeline(PipelineConfig(verification="cosine", tau_relevance=-0.5))  # a cosine may be negative


@pytest.mark.parametrize("value", ["1.5", "-2", "nan"])
def test_the_cli_refuses_tau_outside_its_range_in_one_line(tmp_path, value):
    chunks = tmp_path / "c.json"
    chunks.write_text(json.dumps(["Either party may terminate.", "Fees are monthly."]))
    result = CliRunner().invoke(main, ["select", "--chunks", str(chunks), "-q", "who may terminate", "--tau", value])
    one_line_error(result, "--tau", "outside the relevance score's range [-1, 1]")
