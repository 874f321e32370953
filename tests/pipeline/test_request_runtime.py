"""The one request (its rules and messages, reworded per entry point) and the runtime that runs it."""

from __future__ import annotations

import pytest

from meteora_edge.errors import ConfigError, InputError
from meteora_edge.index.memory_index import InMemoryIndex
from meteora_edge.models.encoders import HashingEncoder
from meteora_edge.pipeline.request import (
    REQUEST_KEYS,
    SETTING_KEYS,
    RequestError,
    SelectRequest,
    request_from_json,
    reword,
)
from meteora_edge.pipeline.runtime import SelectRuntime, check_llm_bundle

CHUNKS = ["Either party may terminate the agreement.", "Fees are due monthly.", "The supplier delivers goods."]
Q = "who may terminate?"

BAD = [
    ({"chunks": CHUNKS, "index": "x", "query": Q}, "give 'chunks' or 'index', not both"),
    ({"index": "x"}, "a search of the index needs a non-empty 'query'"),
    ({"chunks": []}, "'chunks' is empty"),
    ({"chunks": CHUNKS}, "no rationale and no query; give 'query' or 'rationales'"),
    ({"chunks": CHUNKS, "query": Q, "generate_rationales": True, "rationales": ["find it"]},
     "'generate_rationales' writes the rationales itself; drop 'rationales'"),
    ({"chunks": CHUNKS, "query": Q, "generate_rationales": True, "rationales": "query"}, "drop 'rationales'"),
    ({"chunks": CHUNKS, "query": " ", "generate_rationales": True}, "no rationale and no query"),
    ({"chunks": CHUNKS, "query": Q, "verify": True, "settings": {"verification": "cosine"}},
     "'verify' uses the LLM verifier; it conflicts with 'verification' cosine"),
    ({"chunks": CHUNKS, "query": Q, "num_rationales": 2}, "add 'generate_rationales'"),
    ({"chunks": CHUNKS, "query": Q, "generate_rationales": True, "rationale_prompt": "other"},
     "'rationale_prompt' must be one of hops, meteora"),
    ({"chunks": CHUNKS, "query": Q, "llm_rerank": "yes"}, "'llm_rerank' must be true or false, got str"),
    ({"chunks": CHUNKS, "query": Q, "settings": {"max_candidates": 10**6}}, "'max_candidates' may only lower the limit"),
    ({"chunks": CHUNKS, "query": Q, "reject": "drafts"}, "'reject' rules are applied by the LLM; add 'verify' or 'llm_rerank'"),
    ({"chunks": CHUNKS, "query": Q, "llm_rerank": True, "reject": ["drafts", " "]}, "'reject' must be a rule or a list"),
    ({"chunks": CHUNKS, "query": Q, "verify": True, "reject": {"rule": "drafts"}}, "'reject' must be a rule or a list"),
]


@pytest.mark.parametrize("parts, message", BAD, ids=[m[:40] for _, m in BAD])
def test_every_rule_is_one_request_error_naming_its_keys(parts, message):
    with pytest.raises(RequestError) as caught:
        SelectRequest(**parts)
    assert message in str(caught.value)


def test_reword_puts_an_entry_points_names_in_place_of_the_keys():
    with pytest.raises(RequestError) as caught:
        SelectRequest(query=Q, chunks=CHUNKS, verify=True, settings={"verification": "cosine"})
    cli = reword(caught.value, {"verify": "--verify", "verification": "--verification"})
    assert isinstance(cli, RequestError)
    assert str(cli) == "--verify uses the LLM verifier; it conflicts with --verification cosine"
    untouched = ConfigError("t_max must be an integer >= 1 or None, got 0")
    assert reword(untouched, {"t_max": "--t-max"}) is untouched


def test_a_json_body_and_the_python_call_make_the_same_request():
    body = request_from_json({"query": Q, "chunks": CHUNKS, "llm_rerank": True, "t_max": 9, "verification_batch": 4,
                              "verify": True, "rationales": "auto"})
    call = SelectRequest(query=Q, chunks=CHUNKS, llm_rerank=True, verify=True, rationales="auto",
                         settings={"t_max": 9, "verification_batch": 4})
    assert body.config == call.config and body.config.verification == "llm" and body.config.rationales == "auto"
    assert body.batched and body.needs_llm == ("verify", "llm_rerank")
    with pytest.raises(RequestError, match="unknown key"):
        request_from_json({"query": Q, "chunks": CHUNKS, "settings": {}})


def test_rejection_rules_are_folded_and_kept_once_in_order():
    request = request_from_json({"query": Q, "chunks": CHUNKS, "llm_rerank": True,
                                 "reject": ["draft  notes", "superseded terms", "draft notes"]})
    assert request.reject_rules == ("draft notes", "superseded terms")
    assert SelectRequest(query=Q, chunks=CHUNKS, verify=True, reject="drafts").reject_rules == ("drafts",)
    assert SelectRequest(query=Q, chunks=CHUNKS).reject_rules == ()


def test_a_role_without_the_gguf_model_is_refused_in_the_runtimes_words():
    runtime = SelectRuntime(no_llm="start it with a model")
    for key in ("generate_rationales", "verify", "llm_rerank"):
        request = SelectRequest(query=Q, chunks=CHUNKS, **{key: True})
        with pytest.raises(RequestError, match=f"^'{key}' needs the GGUF model: start it with a model$"):
            runtime.run(request)
    with pytest.raises(RequestError, match="give 'bundle' with an llm component"):
        check_llm_bundle(None, ("llm_rerank",))


def test_the_runtime_searches_the_index_a_request_names():
    encoder = HashingEncoder()
    runtime = SelectRuntime(encoder=encoder, indexes={"a": InMemoryIndex(CHUNKS, encoder),
                                                      "b": InMemoryIndex(["Rent is paid yearly."], encoder)})
    first = runtime.result(SelectRequest(query="fees monthly", settings={"t_max": 50}))
    named = runtime.result(SelectRequest(query="rent", index="b"))
    assert named.passages == ["Rent is paid yearly."]
    assert first.passages and set(first.passages) <= set(CHUNKS)
    with pytest.raises(RequestError, match="no index named 'c'"):
        runtime.run(SelectRequest(query="rent", index="c"))
    with pytest.raises(InputError, match="there is no index"):
        SelectRuntime().run(SelectRequest(query="rent"))
