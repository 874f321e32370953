"""Verifiers as METEORA accepts them: prompt-string callables, text models, lenient reading."""

from __future__ import annotations

import pickle
from dataclasses import dataclass

import pytest

from meteora_edge import ConfigError, HashingEncoder, MeteoraReranker, MeteoraVerifier, Rationale, VerificationRequest
from meteora_edge.selection.verification import parse_verdict, verify_chunks

RATIONALES = (Rationale("termination notice", 1, "Termination", "reject draft notes"),)
DOCS = ["Either party may terminate on 90 days notice.", "DRAFT note: termination on 10 days, not approved.",
        "Fees are due monthly."]
ACCEPT = '{"relevant": true, "flagged": false, "reason": "fits", "flag_types": [], "confidence": 0.8}'


def test_the_request_is_the_prompt_and_carries_its_parts():
    request = VerificationRequest("Who may terminate?", DOCS[1], 1, RATIONALES, (DOCS[0],))
    assert isinstance(request, str)
    for part in ("Who may terminate?", DOCS[1], DOCS[0], "Flag Instructions: reject draft notes", '"relevant"'):
        assert part in request
    assert (request.query, request.chunk, request.chunk_index) == ("Who may terminate?", DOCS[1], 1)
    assert request.rationales == RATIONALES and request.accepted_evidence == (DOCS[0],)
    assert type(request.prompt) is str and request.prompt == request
    with pytest.raises(AttributeError):
        request.chunk = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(request)).accepted_evidence == (DOCS[0],)


def test_a_prompt_string_callable_works_as_a_verifier():
    seen: list[str] = []

    def llm(prompt):  # METEORA's verifier model: prompt text in, text out
        seen.append(prompt.upper())  # str methods work on the request
        return "```json\n" + (ACCEPT if "DRAFT" not in prompt else '{"relevant": true, "flagged": true}') + "\n```"

    verdicts = verify_chunks(llm, "Who may terminate?", DOCS, [0, 1], RATIONALES)
    assert [v.accepted for v in verdicts] == [True, False]
    assert verdicts[0].confidence == 0.8 and verdicts[0].raw.startswith("```json")
    assert "EITHER PARTY" in seen[0]
    # the second prompt shows the first chunk as accepted evidence
    assert "[1] EITHER PARTY MAY TERMINATE" in seen[1]


@dataclass
class Message:
    content: str


class ChatModel:
    """A LangChain-like model: .invoke(prompt) returns a message object with .content."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[str] = []

    def invoke(self, prompt):
        self.prompts.append(prompt)
        return Message(self.answer)


class Completer:
    def complete(self, prompt):
        return ACCEPT


class Generator:
    def generate(self, prompt):
        return ACCEPT.encode()


@pytest.mark.parametrize("model", [ChatModel(ACCEPT), Completer(), Generator()])
def test_text_models_with_invoke_complete_or_generate(model):
    rr = MeteoraReranker(HashingEncoder(), verifier=model)
    trace = rr.trace("terminate notice", DOCS, rationales=list(RATIONALES))
    assert trace.verified and trace.verdicts and all(v.accepted for v in trace.verdicts)
    assert all(v.confidence == 0.8 for v in trace.verdicts)


def test_a_model_without_an_entry_point_is_refused():
    with pytest.raises(ConfigError, match="generate"):
        verify_chunks(object(), "q", DOCS, [0], RATIONALES)
    with pytest.raises(ConfigError, match="not callable"):
        MeteoraVerifier(object())
    with pytest.raises(ConfigError, match="fail_closed"):
        MeteoraVerifier(Completer(), fail_closed="no")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "answer, relevant, flagged",
    [
        ('{"relevant": "true", "flagged": 0}', True, False),
        ('{"relevant": 1, "flagged": "yes", "flag_types": ["DRAFT"]}', True, True),
        ("Relevant: yes\nFlagged: no\nReason: states the notice period", True, False),
        ("**relevant**: no, flagged = false", False, False),
        ('{"flagged": true}', False, True),  # missing relevant -> not flagged
        ('{"relevant": "maybe"}', True, False),  # unreadable value -> not flagged -> relevant
    ],
)
def test_lenient_mode_reads_loose_booleans_and_prose(answer, relevant, flagged):
    verdict = MeteoraVerifier(lambda p: answer, fail_closed=False).verify(VerificationRequest("q", "c", 2, ()))
    assert (verdict.relevant, verdict.flagged, verdict.chunk_index) == (relevant, flagged, 2)
    assert verdict.raw == answer


def test_lenient_mode_accepts_what_it_cannot_read_and_strict_mode_rejects_it():
    request = VerificationRequest("q", "c", 0, ())
    lenient = MeteoraVerifier(lambda p: "I cannot decide", fail_closed=False).verify(request)
    assert lenient.accepted and "fail_closed=False" in lenient.reason and not lenient.parse_error
    strict = MeteoraVerifier(lambda p: "I cannot decide").verify(request)
    assert not strict.accepted and strict.parse_error and strict.raw == "I cannot decide"
    # the default stays fail-closed for loose booleans and prose
    assert parse_verdict('{"relevant": "true", "flagged": false}').parse_error
    assert parse_verdict("relevant: yes, flagged: no").parse_error


def test_confidence_and_raw_text_in_verdicts():
    v = parse_verdict('{"relevant": true, "flagged": false, "confidence": "0.25"}')
    assert v.confidence == 0.25 and v.to_dict()["confidence"] == 0.25 and v.to_dict()["raw"].startswith("{")
    assert parse_verdict({"relevant": True, "flagged": False, "confidence": "high"}).confidence is None
    assert parse_verdict({"relevant": True, "flagged": False, "confidence": float("nan")}).confidence is None
    assert parse_verdict({"relevant": True, "flagged": False}).raw is None
    assert len(parse_verdict("x" * 10_000).raw) == 2000


def test_request_callables_keep_working_through_the_reranker():
    requests = []

    def judge(request):
        requests.append((request.chunk_index, request.chunk))
        return {"relevant": True, "flagged": "DRAFT" in request.chunk}

    rr = MeteoraReranker(HashingEncoder(), verifier=judge)
    kept = rr.filter("termination notice draft", DOCS, rationales=["termination notice", "draft note"])
    assert DOCS[1] not in kept and requests and all(isinstance(c, str) for _, c in requests)


# -- rationale generators and rerank results, as METEORA's ------------------------------------


def test_a_generator_taking_query_and_documents_gets_both():
    calls = []

    def generator(query, documents):
        calls.append((query, list(documents)))
        return "<rationale_1>[Termination] termination notice</rationale_1>"

    trace = MeteoraReranker(HashingEncoder(), rationale_generator=generator).trace("who may terminate?", DOCS)
    assert calls == [("who may terminate?", DOCS)] and trace.rationale_source == "generated"
    assert trace.rationales[0].label == "Termination"


class InvokeGenerator:
    def invoke(self, query, documents=None):
        self.documents = documents
        return Message("<rationale_1>fees monthly</rationale_1>")  # a chat message object


def test_generator_objects_and_message_answers():
    gen = InvokeGenerator()
    kept = MeteoraReranker(HashingEncoder(), rationale_generator=gen).filter("what about fees?", DOCS)
    assert gen.documents == DOCS and kept == [DOCS[2]]
    only_query = MeteoraReranker(HashingEncoder(), rationale_generator=lambda q: "fees monthly")
    assert only_query.trace("q", DOCS).rationales[0].text == "fees monthly"
    with pytest.raises(ConfigError, match="not callable"):
        MeteoraReranker(HashingEncoder(), rationale_generator=42).trace("q", DOCS)


def test_rerank_results_expose_rank_text_and_metadata():
    docs = [{"text": DOCS[0], "id": "a", "metadata": {"page": 3}}, {"text": DOCS[2], "id": "b"}]
    rr = MeteoraReranker(HashingEncoder(), verifier=lambda r: {"relevant": True, "flagged": False})
    results = rr.rerank("terminate notice fees monthly", docs, rationales=["terminate notice", "fees monthly"])
    assert [r.rank for r in results] == list(range(1, len(results) + 1))
    by_index = {r.index: r for r in results}
    assert by_index[0].text == DOCS[0] and by_index[0].metadata == {"id": "a", "page": 3}
    assert by_index[0].document is docs[0] and by_index[0].verdict.accepted and by_index[0].accepted
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert results[0].to_dict()["rank"] == 1



@pytest.mark.parametrize("alias", ["input", "context", "document"])
def test_meteoras_order_names(alias):
    rr = MeteoraReranker(HashingEncoder(), order=alias)
    trace = rr.trace("terminate notice fees monthly", DOCS, rationales=["terminate notice", "fees monthly"])
    assert trace.order == "document" and trace.indices == sorted(trace.indices)
