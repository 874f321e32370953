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
