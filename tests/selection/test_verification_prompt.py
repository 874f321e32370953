"""What a verifier is given and how it is called: the prompt text (passage number, evidence
list, the "(none)" placeholders), the entry points of a verifier or text model, the errors for
an object that has none, and the batch size of batched verification."""

from __future__ import annotations

import json

import pytest

from meteora_edge.errors import ConfigError, InputError
from meteora_edge.selection.rationales import Rationale
from meteora_edge.selection.verification import (
    MeteoraVerifier,
    VerificationRequest,
    call_verifier,
    render_verifier_prompt,
    verify_chunks_batched,
)

RATIONALE = Rationale("find the notice period", 1, "Notice", "reject draft notes")
ACCEPT = '{"relevant": true, "flagged": false}'


# -- the prompt ------------------------------------------------------------------------------


def test_the_prompt_numbers_the_passage_and_lists_the_evidence_one_per_line():
    prompt = render_verifier_prompt("  Who may\nterminate? ", "\n Either party may terminate.\n", 4, (RATIONALE,),
                                    ["Notice is  90\ndays.", "Either party may   end it."])
    assert "Query: Who may terminate?\n" in prompt
    assert "Evidence accepted so far:\n[1] Notice is 90 days.\n[2] Either party may end it.\n\nPassage 4:\n" in prompt
    assert "Passage 4:\nEither party may terminate.\n\nAnswer with one JSON object" in prompt
    assert RATIONALE.to_tagged() in prompt and "(none)" not in prompt


def test_no_rationales_and_no_evidence_read_none():
    prompt = render_verifier_prompt("q", "c", 0, (), ())
    assert "must be flagged):\n(none)\n\nEvidence accepted so far:\n(none)\n\nPassage 0:\nc\n" in prompt


def test_the_request_is_the_rendered_prompt():
    request = VerificationRequest("q", "c", 7, (RATIONALE,), ("e",))
    assert request.prompt == render_verifier_prompt("q", "c", 7, (RATIONALE,), ("e",))
    assert "Passage 7:\nc" in request


# -- calling a verifier ----------------------------------------------------------------------


class Recorder:
    """A text model with one entry point (``method``) that records what it was given."""

    def __init__(self, method: str):
        self.seen = []
        setattr(self, method, self.answer)

    def answer(self, prompt):
        self.seen.append(prompt)
        return ACCEPT


@pytest.mark.parametrize("method", ["verify", "generate", "complete", "invoke"])
def test_every_entry_point_gets_the_request_itself(method):
    model = Recorder(method)
    request = VerificationRequest("q", "the passage", 2, ())
    assert call_verifier(model, request) == ACCEPT
    assert model.seen == [request] and model.seen[0].chunk == "the passage"


def test_an_object_without_an_entry_point_is_named_in_the_error():
    class Plain:
        generate = "not callable"

    with pytest.raises(ConfigError) as error:
        call_verifier(Plain(), VerificationRequest("q", "c", 0, ()))
    assert str(error.value) == ("verifier of type Plain has no .verify(), .generate(), .complete() or .invoke() "
                                "and is not callable")


@pytest.mark.parametrize("method", ["verify", "generate", "complete", "invoke"])
def test_meteora_verifier_takes_any_entry_point_and_passes_the_request(method):
    model = Recorder(method)
    verifier = MeteoraVerifier(model)
    request = VerificationRequest("q", "the passage", 5, ())
    verdict = verifier.verify(request)
    assert verdict.accepted and verdict.chunk_index == 5 and model.seen == [request]


def test_meteora_verifier_refuses_a_model_without_an_entry_point_by_its_type():
    class Plain:
        invoke = None

    with pytest.raises(ConfigError) as error:
        MeteoraVerifier(Plain())
    assert str(error.value) == ("verifier model of type Plain is not callable and has no .generate(), "
                                ".complete() or .invoke()")


def test_meteora_verifier_reads_the_answer_to_the_prompt_it_was_sent():
    verifier = MeteoraVerifier(lambda prompt: "relevant: yes" if "terminate" in prompt else "relevant: no",
                               fail_closed=False)
    assert verifier.verify(VerificationRequest("q", "may terminate", 0, ())).relevant is True
    assert verifier.verify(VerificationRequest("q", "fees", 1, ())).relevant is False


def test_meteora_verifier_repr_names_the_model_type_and_the_mode():
    assert repr(MeteoraVerifier(Recorder("complete"), fail_closed=False)) == "MeteoraVerifier(model=Recorder, fail_closed=False)"
    assert repr(MeteoraVerifier(len)) == "MeteoraVerifier(model=builtin_function_or_method, fail_closed=True)"


# -- the batch size --------------------------------------------------------------------------


class Batches:
    def __init__(self):
        self.sizes = []

    def verify_batch(self, requests):
        self.sizes.append(len(requests))
        return json.dumps([{"id": r.chunk_index, "relevant": True, "flagged": False} for r in requests])


@pytest.mark.parametrize("batch_size, sizes", [(1, [1, 1, 1]), (2, [2, 1]), (5, [3])])
def test_a_batch_size_of_one_or_more_splits_the_chunks(batch_size, sizes):
    verifier = Batches()
    verdicts = verify_chunks_batched(verifier, "q", ["a", "b", "c"], [2, 0, 1], (), batch_size=batch_size)
    assert verifier.sizes == sizes and [v.chunk_index for v in verdicts] == [2, 0, 1]
    assert all(v.accepted for v in verdicts)


@pytest.mark.parametrize("batch_size", [0, -1, True, 2.0, "2", None])
def test_a_batch_size_that_is_not_a_positive_integer_is_an_input_error(batch_size):
    verifier = Batches()
    with pytest.raises(InputError) as error:
        verify_chunks_batched(verifier, "q", ["a"], [0], (), batch_size=batch_size)
    assert str(error.value) == f"batch_size must be a positive integer, got {batch_size!r}"
    assert verifier.sizes == []
