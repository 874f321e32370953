import pytest

from meteora_edge import parse_verdict


@pytest.mark.parametrize(
    "raw, accepted, flag_types",
    [
        ('{"relevant": true, "flagged": false, "reason": "fits", "flag_types": []}', True, ()),
        ('```json\n{"relevant": true, "flagged": false}\n```', True, ()),
        ('Sure. {"relevant": true, "flagged": true, "reason": "a {brace} in \\"text\\"", "flag_types": ["X"]} done',
         False, ("X",)),
        ({"relevant": True, "flagged": False}, True, ()),
        ({"relevant": "yes", "flagged": False}, False, ("PARSE_ERROR",)),
        ('{"relevant": true}', False, ("PARSE_ERROR",)),
        ("not json at all", False, ("PARSE_ERROR",)),
        ('{"relevant": true, "flagged": false', False, ("PARSE_ERROR",)),
        ("[1, 2]", False, ("PARSE_ERROR",)),
        (None, False, ("PARSE_ERROR",)),
        (b'{"relevant": false, "flagged": false}', False, ()),
        ('{"relevant": true, "flagged": false, "flag_types": "INJECTION"}', True, ("INJECTION",)),
        ("[" * 5000, False, ("PARSE_ERROR",)),
    ],
)
def test_parse_verdict_table(raw, accepted, flag_types):
    verdict = parse_verdict(raw, chunk_index=3)
    assert verdict.accepted is accepted
    assert verdict.flag_types == flag_types
    assert verdict.chunk_index == 3


def test_reason_is_bounded():
    v = parse_verdict({"relevant": True, "flagged": False, "reason": "x" * 10_000})
    assert len(v.reason) == 500


# -- exact readings (each kills mutants that survived) ---------------------------------------


def test_a_verdict_as_a_dict_names_every_field():
    from meteora_edge.selection.verification import Verdict

    verdict = Verdict(relevant=True, flagged=True, reason="r", flag_types=("OFF_TOPIC",), chunk_index=4, confidence=0.5,
                      raw="{}")
    assert verdict.to_dict() == {"chunk_index": 4, "accepted": False, "relevant": True, "flagged": True, "reason": "r",
                                 "flag_types": ["OFF_TOPIC"], "confidence": 0.5, "raw": "{}"}


def test_a_verdict_object_is_returned_as_is_or_renumbered():
    from meteora_edge.selection.verification import Verdict

    verdict = Verdict(relevant=True, flagged=False, reason="kept", chunk_index=2)
    assert parse_verdict(verdict, chunk_index=2) is verdict
    moved = parse_verdict(verdict, chunk_index=7)
    assert moved.chunk_index == 7 and moved.reason == "kept" and moved.accepted and verdict.chunk_index == 2


@pytest.mark.parametrize("text", [
    'Verdict: {"relevant": true, "flagged": false, "reason": "says \\"ends {early}\\" here"}!',
    'noise { never closed, then {"relevant": true, "flagged": false, "meta": {"k": 1}}',
    '{"relevant": true, "flagged": false, "reason": "a \\\\ backslash"} and more',
])
def test_the_first_balanced_object_is_found_in_prose(text):
    verdict = parse_verdict(text, chunk_index=1)
    assert verdict.accepted and not verdict.parse_error and verdict.chunk_index == 1 and verdict.raw == text


def test_unreadable_answers_name_what_was_given_and_keep_it():
    text = "I cannot decide about this passage, sorry. " * 3
    failed = parse_verdict(text, chunk_index=3)
    assert failed.reason == f"verifier answer is not a JSON object: {text[:80]!r}"
    assert failed.parse_error and failed.chunk_index == 3 and failed.raw == text
    assert parse_verdict(42, chunk_index=3).reason == "verifier answer is not a JSON object: a int"
    lenient = parse_verdict(text, chunk_index=5, fail_closed=False)
    assert lenient.accepted and lenient.flagged is False and lenient.chunk_index == 5 and lenient.raw == text
    assert lenient.reason == f"could not read the verifier answer ({text[:80]!r}); accepted because fail_closed=False"


def test_missing_booleans_are_named_and_reasons_default_to_empty():
    answer = '{"relevant": "yes", "flagged": 0}'
    failed = parse_verdict(answer, chunk_index=2)
    assert failed.reason == "verifier answer lacks boolean 'relevant'/'flagged' (got 'yes', 0)"
    assert failed.raw == answer and failed.chunk_index == 2
    assert parse_verdict({"relevant": True, "flagged": False}).reason == ""
    assert parse_verdict({"relevant": True, "flagged": False}).raw is None  # a mapping has no answer text
    assert parse_verdict({"relevant": True, "flagged": False, "explanation": "e"}).reason == ""
    assert parse_verdict({"relevant": True, "flagged": False, "explanation": "e"}, fail_closed=False).reason == "e"


def test_verification_still_offers_every_name_its_three_modules_define():
    """verification.py is the public home; the protocol, the readers and the drivers live apart."""
    from meteora_edge.selection import verdict_readers, verification, verifier_calls, verifier_protocol

    homes = {name: module for module in (verifier_protocol, verdict_readers, verifier_calls) for name in module.__all__}
    assert set(verification.__all__) < set(homes)
    for name, module in homes.items():
        assert getattr(verification, name) is getattr(module, name), name
