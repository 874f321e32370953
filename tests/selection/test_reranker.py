import copy
import json
from dataclasses import dataclass

import numpy as np
import pytest

from meteora_edge import Chunk, ConfigError, HashingEncoder, InputError, MeteoraReranker, Rationale
from meteora_edge.selection.verification import VerificationRequest

DOCS_TEXT = [
    "Rent is due on the first day of each month.",
    "The tenant may terminate the lease with sixty days written notice.",
    "Pets are not allowed without written consent.",
    "The landlord may terminate the lease if rent is unpaid for two months.",
]


@dataclass
class LangChainLike:
    page_content: str
    metadata: dict


class TextObj:
    def __init__(self, text: str) -> None:
        self.text = text


@pytest.mark.parametrize(
    "wrap",
    [
        lambda t: t,
        lambda t: {"text": t},
        lambda t: {"content": t},
        lambda t: {"page_content": t, "metadata": {}},
        lambda t: Chunk(t),
        lambda t: LangChainLike(t, {"s": 1}),
        TextObj,
    ],
)
def test_filter_returns_the_callers_objects_for_every_shape(wrap):
    docs = [wrap(t) for t in DOCS_TEXT]
    snapshot = copy.deepcopy(docs) if not isinstance(docs[0], TextObj) else None
    kept = MeteoraReranker(HashingEncoder()).filter("when may the tenant terminate the lease", docs)
    assert kept and all(any(k is d for d in docs) for k in kept)
    assert kept[0] is docs[1]
    if snapshot is not None:
        assert docs == snapshot


def test_score_is_max_of_pooled_and_pairing_and_order_options():
    rr = MeteoraReranker(HashingEncoder())
    trace = rr.trace("terminate lease", DOCS_TEXT, rationales=["tenant terminate notice", "landlord unpaid rent"])
    sel = trace.selection
    for i, s in zip(trace.indices, trace.scores):
        assert s == pytest.approx(max(sel.pooled_scores[i], sel.pairing_scores[i]))
    assert trace.scores == sorted(trace.scores, reverse=True)
    by_doc = rr.trace("terminate lease", DOCS_TEXT, rationales=["tenant terminate notice", "landlord unpaid rent"],
                      order="document")
    assert by_doc.indices == sorted(trace.indices)
    capped = rr.trace("terminate lease", DOCS_TEXT, rationales=["tenant terminate notice", "landlord unpaid rent"],
                      top_k=1)
    assert capped.indices == trace.indices[:1]
    json.dumps(trace.to_dict())


def test_rationale_sources_given_generated_and_fallback():
    rr = MeteoraReranker(HashingEncoder(), rationale_generator=lambda q: "<rationale_1>pets consent</rationale_1>")
    assert rr.trace("q", DOCS_TEXT).rationale_source == "generated"
    assert rr.trace("q", DOCS_TEXT, rationales=["rent due"]).rationale_source == "given"
    empty_gen = MeteoraReranker(HashingEncoder(), rationale_generator=lambda q: "")
    t = empty_gen.trace("rent due", DOCS_TEXT)
    assert t.rationale_source == "query-fallback" and t.rationales == [Rationale("rent due", 1)]
    strict = MeteoraReranker(HashingEncoder(), fallback_to_query_rationale=False)
    with pytest.raises(InputError, match="no rationale"):
        strict.trace("rent", DOCS_TEXT)


class RecordingVerifier:
    def __init__(self, answers):
        self.answers = list(answers)
        self.requests: list[VerificationRequest] = []

    def verify(self, request):
        self.requests.append(request)
        return self.answers.pop(0)


def test_verifier_sees_accepted_evidence_and_fails_closed():
    docs = ["alpha terminate", "beta terminate", "gamma terminate"]
    verifier = RecordingVerifier([
        '{"relevant": true, "flagged": false, "reason": "ok", "flag_types": []}',
        "I think it is relevant",  # garbage -> rejected
        {"relevant": True, "flagged": True, "reason": "draft", "flag_types": ["DRAFT"]},
    ])
    rr = MeteoraReranker(lambda ts: np.ones((len(ts), 3)), verifier=verifier, expansion_window=2)
    trace = rr.trace("terminate", docs, order="document")
    assert trace.verified
    judged = [r.chunk_index for r in verifier.requests]
    assert sorted(judged) == [0, 1, 2]
    assert verifier.requests[0].accepted_evidence == ()
    assert verifier.requests[1].accepted_evidence == (docs[judged[0]],)
    assert verifier.requests[2].accepted_evidence == (docs[judged[0]],)
    assert trace.indices == [judged[0]]
    types = [v.flag_types for v in trace.verdicts]
    assert types[1] == ("PARSE_ERROR",) and types[2] == ("DRAFT",)
    assert rr.trace("terminate", docs, verify=False).verdicts == []


def test_verify_true_without_verifier_and_model_errors_propagate():
    with pytest.raises(InputError, match="no verifier"):
        MeteoraReranker(HashingEncoder()).trace("q", DOCS_TEXT, verify=True)

    def broken(request):
        raise RuntimeError("model crashed")

    with pytest.raises(RuntimeError, match="model crashed"):
        MeteoraReranker(HashingEncoder(), verifier=broken).trace("rent", DOCS_TEXT)


@pytest.mark.parametrize("kwargs", [{"order": "best"}, {"top_k": 0}, {"top_k": 1.5}, {"expansion_window": -2}])
def test_bad_options_are_refused(kwargs):
    with pytest.raises(ConfigError):
        MeteoraReranker(HashingEncoder(), **kwargs)


def test_bad_query_and_encoder():
    with pytest.raises(InputError, match="query"):
        MeteoraReranker(HashingEncoder()).trace(None, DOCS_TEXT)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="encoder"):
        MeteoraReranker(object()).trace("q", DOCS_TEXT)  # type: ignore[arg-type]
