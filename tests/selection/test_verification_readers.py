"""Reading verifier answers: the balanced-object finder in prose, answers given as bytes or
message objects, METEORA's lenient prose and loose booleans, the fields a verdict keeps or
drops (reason, flag types, confidence), and the ids of a batched answer."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import pytest

from meteora_edge.selection.verification import PARSE_ERROR, parse_batch_verdicts, parse_verdict

ACCEPT = '"relevant": true, "flagged": false'


# -- the first balanced object in prose ------------------------------------------------------


@pytest.mark.parametrize("text", [
    'Verdict: {"reason": "a } inside a string", ' + ACCEPT + "} — done",
    'Verdict: {"reason": "a { inside a string", ' + ACCEPT + "} — done",
    'Verdict: {"reason": "quotes \\"}\\" escaped", ' + ACCEPT + "} — done",
    'Verdict: {"": "}", ' + ACCEPT + "} — done",             # an empty string right after the brace
    'Verdict: {"\\"}": 1, ' + ACCEPT + "} — done",           # a string that starts with an escape
    'Verdict: {{' + ACCEPT + "} — done",                      # a stray brace just before the object
], ids=["close-in-string", "open-in-string", "escaped-quotes", "empty-first-string", "escape-first", "stray-brace"])
def test_braces_inside_strings_do_not_end_the_object(text):
    verdict = parse_verdict(text, chunk_index=4)
    assert verdict.accepted and not verdict.parse_error and verdict.raw == text


def test_an_answer_that_is_one_object_is_read_whole_even_when_its_reason_quotes_a_fence():
    text = '{' + ACCEPT + ', "reason": "the passage shows ```{}``` as an empty config"}'
    verdict = parse_verdict(text)
    assert verdict.accepted and verdict.reason == "the passage shows ```{}``` as an empty config"


def test_the_reason_is_read_whole_from_an_object_in_prose():
    verdict = parse_verdict('Sure: {"reason": "says \\"}\\" twice", ' + ACCEPT + "} ok")
    assert verdict.reason == 'says "}" twice'


# -- answers that are not plain strings ------------------------------------------------------


def test_bytes_are_decoded_as_utf8_and_bad_bytes_are_replaced():
    assert parse_verdict(('{"reason": "café", ' + ACCEPT + "}").encode("utf-8")).reason == "café"
    verdict = parse_verdict(b"\xff\xfe {" + ACCEPT.encode() + b', "reason": "ok \xff"}')
    assert verdict.accepted and verdict.reason == "ok \ufffd"
    assert verdict.raw.startswith("\ufffd\ufffd {")
    assert parse_verdict(bytearray(b"{" + ACCEPT.encode() + b"}")).accepted


class Answer:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


@pytest.mark.parametrize("attribute", ["content", "text", "output_text"])
def test_message_objects_give_their_text(attribute):
    text = "{" + ACCEPT + ', "reason": "from .' + attribute + '"}'
    verdict = parse_verdict(Answer(**{attribute: text}), chunk_index=1)
    assert verdict.accepted and verdict.reason == "from ." + attribute and verdict.raw == text


def test_content_comes_before_text_and_a_non_string_attribute_is_skipped():
    both = Answer(content="{" + ACCEPT + "}", text='{"relevant": false, "flagged": false}')
    assert parse_verdict(both).accepted
    skipped = Answer(content=None, text=["no"], output_text="{" + ACCEPT + "}")
    assert parse_verdict(skipped).accepted
    assert parse_verdict(Answer(content=3)).reason == "verifier answer is not a JSON object: a Answer"


class MappingMessage(Mapping):
    """A dict-like answer that also carries a ``text`` attribute (some client libraries do)."""

    text = "relevant: no"

    def __init__(self, fields):
        self.fields = fields

    def __getitem__(self, key):
        return self.fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


def test_a_mapping_is_read_as_fields_and_keeps_no_answer_text():
    verdict = parse_verdict(MappingMessage({"relevant": True, "flagged": False}), fail_closed=False)
    assert verdict.accepted and verdict.raw is None


def test_an_unreadable_answer_is_neither_relevant_nor_accepted():
    for raw in ("no idea", None, b"", {"relevant": "yes", "flagged": False}):
        verdict = parse_verdict(raw, chunk_index=2)
        assert (verdict.relevant, verdict.flagged, verdict.flag_types) == (False, True, (PARSE_ERROR,))
        assert verdict.to_dict()["relevant"] is False


# -- METEORA's lenient reading ---------------------------------------------------------------


@pytest.mark.parametrize("answer, relevant, flagged, reason", [
    ("Relevant: no\nFlagged: no\nReason: about fees, not notice", False, False, "about fees, not notice"),
    ("RELEVANT: NO", False, False, ""),
    ("relevant: yes, flagged: yes", True, True, ""),
    ("relevant = 1; FLAGGED = 1\nreason:   the draft note  ", True, True, "the draft note"),
    ("**Flagged**: true", False, True, ""),                    # missing relevant -> not flagged
], ids=["reason-line", "upper-case", "flagged-yes", "numbers", "only-flagged"])
def test_prose_answers_are_read_field_by_field(answer, relevant, flagged, reason):
    verdict = parse_verdict(answer, chunk_index=3, fail_closed=False)
    assert (verdict.relevant, verdict.flagged, verdict.reason) == (relevant, flagged, reason)
    assert not verdict.parse_error and verdict.raw == answer


@pytest.mark.parametrize("value, relevant", [
    ("no", False), (" No ", False), ("rejected", False), ("0", False), ("false", False),
    ("yes", True), ("ACCEPT", True), ("y", True), ("maybe", True),   # unreadable -> not flagged -> relevant
    (0, False), (2.5, True), (float("nan"), True), (None, True),
])
def test_loose_relevant_values_in_lenient_mode(value, relevant):
    verdict = parse_verdict({"relevant": value, "flagged": "no"}, fail_closed=False)
    assert verdict.relevant is relevant and verdict.flagged is False


@pytest.mark.parametrize("value, flagged", [("yes", True), ("no", False), ("reject", False), ("nonsense", False), (1, True)])
def test_loose_flagged_values_in_lenient_mode(value, flagged):
    verdict = parse_verdict({"relevant": "true", "flagged": value}, fail_closed=False)
    assert verdict.flagged is flagged and verdict.relevant is True


# -- the fields a verdict keeps --------------------------------------------------------------


def test_reasons_and_explanations():
    assert parse_verdict({"relevant": True, "flagged": False}, fail_closed=False).reason == ""
    assert parse_verdict('{"relevant": "yes"}', fail_closed=False).reason == ""
    for reason in (42, ["a", "b"], {"text": "x"}):
        assert parse_verdict({"relevant": True, "flagged": False, "reason": reason}).reason == ""
        assert parse_verdict({"relevant": True, "flagged": False, "reason": reason}, fail_closed=False).reason == ""
    assert parse_verdict({"relevant": True, "flagged": False, "explanation": 7}, fail_closed=False).reason == ""


@pytest.mark.parametrize("flag_types, kept", [
    (["OFF_TOPIC", 3, 1.5, None, ["nested"]], ("OFF_TOPIC", "3", "1.5")),
    ("INJECTION", ("INJECTION",)),
    ({"INJECTION": True}, ()),
    (42, ()),
    (["X" * 100], ("X" * 64,)),
], ids=["mixed-list", "one-string", "mapping", "number", "long"])
def test_flag_types_keep_strings_and_numbers_of_a_list_cut_to_64_characters(flag_types, kept):
    verdict = parse_verdict({"relevant": True, "flagged": True, "flag_types": flag_types})
    assert verdict.flag_types == kept


@pytest.mark.parametrize("confidence, kept", [
    (0.75, 0.75), ("0.5", 0.5), (1, 1.0), (True, None), (False, None), (None, None), ("high", None),
    (float("inf"), None), ([0.5], None),
])
def test_confidence_is_a_finite_number_and_never_a_boolean(confidence, kept):
    verdict = parse_verdict({"relevant": True, "flagged": False, "confidence": confidence})
    assert verdict.confidence == kept


# -- the ids of a batched answer -------------------------------------------------------------


def items(*ids):
    return [{"id": i, "relevant": True, "flagged": False} for i in ids]


@pytest.mark.parametrize("given", ["3", " 3 ", "[3]", " [3] ", 3])
def test_an_id_may_be_a_number_digits_or_digits_in_brackets(given):
    verdicts = parse_batch_verdicts(items(given, 5), [3, 5])
    assert [v.accepted for v in verdicts] == [True, True]


@pytest.mark.parametrize("given", ["X3", "3X", "XX3XX", "#3", "3.0", "-3", "", "[]"])
def test_an_id_with_anything_but_digits_and_brackets_is_no_id(given):
    verdicts = parse_batch_verdicts(items(given, 5), [3, 5])
    assert verdicts[0].parse_error and verdicts[0].reason == "batched verifier answer has no verdict for chunk 3"
    assert verdicts[1].accepted


def test_ids_not_asked_for_are_ignored_even_when_repeated():
    verdicts = parse_batch_verdicts(items(9, 9, 3, None), [3])
    assert len(verdicts) == 1 and verdicts[0].accepted and verdicts[0].chunk_index == 3


def test_a_batched_answer_in_bytes_is_decoded_with_bad_bytes_replaced():
    raw = b"\xff [" + json.dumps(items(3)[0] | {"reason": "d\u00e9j\u00e0"}).encode() + b"]"
    verdict = parse_batch_verdicts(raw, [3])[0]
    assert verdict.accepted and verdict.reason == "déjà"


@pytest.mark.parametrize("given", ["\u00b3", "[\u00b2]", "\u2463"], ids=["superscript", "bracketed-superscript", "circled"])
def test_digit_like_characters_are_no_id_and_do_not_stop_the_reading(given):
    verdicts = parse_batch_verdicts(items(given, 5), [3, 5])
    assert verdicts[0].parse_error and verdicts[1].accepted


def test_decimal_digits_of_any_script_are_an_id():
    assert parse_batch_verdicts(items("\u0663"), [3])[0].accepted  # Arabic-Indic three
