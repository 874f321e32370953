import pytest

from meteora_edge import InputError, Rationale, format_rationales, parse_rationales
from meteora_edge.selection.rationales import as_rationales


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "<rationale_1>[Termination] Find early-exit clauses Flag Instructions: reject drafts</rationale_1>"
            "<rationale_2>Find fees</rationale_2>",
            [("Find early-exit clauses", "Termination", "reject drafts"), ("Find fees", None, None)],
        ),
        ("Sure!\n<rationale>find the notice period</rationale>\n<Rationale 2>find fees", [
            ("find the notice period", None, None), ("find fees", None, None)]),
        ("Rationale 1: find x\nRationale 2: [Law] find y\nFlag instructions: ignore z", [
            ("find x", None, None), ("find y", "Law", "ignore z")]),
        ("Here you go:\n1. alpha\n2) beta\n- gamma", [("alpha", None, None), ("beta", None, None), ("gamma", None, None)]),
        ("first line\n\n  second line  \n", [("first line", None, None), ("second line", None, None)]),
        ("", []),
        ("<rationale_1></rationale_1>", []),
        ("<rationale_1>[L] Flag Instructions: only a rule</rationale_1>", []),
    ],
)
def test_parse_rationales_formats(text, expected):
    got = parse_rationales(text)
    assert [(r.text, r.label, r.flag_instructions) for r in got] == expected
    assert [r.index for r in got] == list(range(1, len(expected) + 1))


def test_canonical_form_round_trips():
    rs = [Rationale("find a", 1, "A", "reject b"), Rationale("find c", 2)]
    assert parse_rationales(format_rationales(rs)) == rs


def test_as_rationales_accepts_strings_objects_and_dicts():
    got = as_rationales(["[L] x Flag Instructions: y", Rationale("z", 7), {"text": "w", "label": "K"}])
    assert [(r.text, r.index, r.label, r.flag_instructions) for r in got] == [
        ("x", 1, "L", "y"), ("z", 2, None, None), ("w", 3, "K", None)]


@pytest.mark.parametrize("bad", [[1], [{"label": "x"}], ["  "], 5, None])
def test_as_rationales_refuses_bad_items(bad):
    with pytest.raises(InputError):
        as_rationales(bad)


def test_parse_rationales_refuses_non_text():
    with pytest.raises(InputError, match="string"):
        parse_rationales(b"bytes")  # type: ignore[arg-type]
