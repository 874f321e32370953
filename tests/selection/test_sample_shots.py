"""Sample shots and generator settings as METEORA documents them."""

from __future__ import annotations

import json

import pytest
from llm_fakes import FakeLlama

from meteora_edge import ConfigError, InputError, LlamaRationaleGenerator, LocalLLM, load_sample_shots
from meteora_edge.selection.sample_shots import check_shots

DELIVERY = (
    "<rationale_1>[Delivery time] Search for dispatch and delivery timelines. Flag Instructions: Reject passages "
    "that contradict the stated delivery deadline.</rationale_1>"
)
METEORA_SHOT = {"query": "When will my order arrive?", "response": DELIVERY}


def generator(shots, fake=None, **kwargs):
    return LlamaRationaleGenerator(LocalLLM(fake or FakeLlama(["<rationale_1>[A] x</rationale_1>"])),
                                   sample_shots=shots, **kwargs)


def test_meteora_quick_start_shot_and_keywords_work_as_written():
    fake = FakeLlama(["<rationale_1>[Returns] Find the return window.</rationale_1>"])
    gen = generator([METEORA_SHOT], fake, domain="online store policies", num_rationales=1,
                    include_flag_instructions=True, max_new_tokens=160, do_sample=False)
    out = gen.generate("Can I return an opened item?")
    prompt = fake.prompt_text()
    assert "in online store policies" in prompt and "exactly 1 rationale(s)" in prompt
    assert "Query: When will my order arrive?" in prompt
    assert "[Delivery time] Search for dispatch and delivery timelines. Flag Instructions: Reject passages" in prompt
    call = fake.calls[0]
    assert call["max_tokens"] == 160 and call["temperature"] == 0.0
    assert out[0].label == "Returns"


@pytest.mark.parametrize(
    "shot, query, label",
    [
        ({"query": "q1", "rationales": ["[L] find x Flag Instructions: reject y"]}, "q1", "L"),
        ({"query": "q1", "rationales": "<rationale_1>[L] find x</rationale_1>"}, "q1", "L"),
        ({"question": "q2", "completion": DELIVERY}, "q2", "Delivery time"),
        ({"prompt": "q3", "answer": DELIVERY}, "q3", "Delivery time"),
        ({"query": "q4", "rationales": [{"rationale": "find x", "label": "L"}]}, "q4", "L"),
        ("Query: q5\nRationales:\n" + DELIVERY, "q5", "Delivery time"),
        ("question: q6\n" + DELIVERY, "q6", "Delivery time"),
    ],
)
def test_every_shot_form_becomes_a_query_and_its_rationales(shot, query, label):
    (checked,) = check_shots([shot])
    assert checked.query == query and checked.rationales[0].label == label


def test_a_plain_example_string_is_shown_verbatim_in_the_instructions():
    fake = FakeLlama(["<rationale_1>x</rationale_1>"])
    gen = generator(["Example: for delivery questions, search the shipping policy.", METEORA_SHOT], fake)
    gen.generate("q?")
    prompt = fake.prompt_text()
    system = prompt.split("<|im_end|>")[0]
    assert "Examples:\nExample: for delivery questions, search the shipping policy." in system
    assert prompt.count("Query: When will my order arrive?") == 1


@pytest.mark.parametrize(
    "shots, message",
    [
        ([{"response": DELIVERY}], "shot 0 needs a non-empty string 'query'"),
        ([{"query": "q", "response": ""}], "at least one rationale"),
        ([{"query": "q", "response": "   "}], "at least one rationale"),
        (["Query: q\n"], "no rationale after it"),
        ([""], "empty string"),
        ([3], "is a int"),
        ([{"query": "q", "rationales": [5]}], "position 0"),
    ],
)
def test_bad_shots_are_refused_with_the_position(shots, message):
    with pytest.raises(ConfigError, match=message):
        check_shots(shots)


def test_shot_files_json_jsonl_and_text(tmp_path):
    (tmp_path / "shots.json").write_text(json.dumps({"sample_shots": [METEORA_SHOT]}))
    (tmp_path / "shots.jsonl").write_text(json.dumps(METEORA_SHOT) + "\n\n" + json.dumps({"query": "b", "rationales": ["y"]}) + "\n")
    (tmp_path / "shots.txt").write_text(
        "Query: When will my order arrive?\n" + DELIVERY + "\n\nQuery: Can I return it?\n\n"
        "<rationale_1>[Returns] Find the return window.</rationale_1>\n"
    )
    (tmp_path / "blocks.txt").write_text("[Label] first example\n\nsecond example\n")
    assert load_sample_shots(tmp_path / "shots.json") == [METEORA_SHOT]
    assert [s["query"] for s in load_sample_shots(tmp_path / "shots.jsonl")] == ["When will my order arrive?", "b"]
    text_shots = check_shots(load_sample_shots(tmp_path / "shots.txt"))
    assert [s.query for s in text_shots] == ["When will my order arrive?", "Can I return it?"]
    assert text_shots[1].rationales[0].label == "Returns"  # a blank line inside a shot does not split it
    blocks = load_sample_shots(tmp_path / "blocks.txt")  # starts with "[": not JSON, read as text
    assert blocks == ["[Label] first example", "second example"]
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(InputError, match="no sample shots"):
        load_sample_shots(tmp_path / "empty.txt")
    (tmp_path / "bad.jsonl").write_text('{"query": 1}\n{oops\n')
    with pytest.raises(InputError, match="line 2"):
        load_sample_shots(tmp_path / "bad.jsonl")
    with pytest.raises(InputError, match="not found"):
        load_sample_shots(tmp_path / "missing.json")


@pytest.mark.parametrize(
    "kwargs, temperature, top_p",
    [
        ({}, 0.0, None),
        ({"do_sample": False, "temperature": 0.9, "top_p": 0.5}, 0.0, None),  # greedy whatever the temperature
        ({"do_sample": True}, 0.7, None),  # METEORA's sampling temperature
        ({"do_sample": True, "temperature": 0.3, "top_p": 0.9}, 0.3, 0.9),
        ({"temperature": 0.5}, 0.5, None),  # the existing name keeps sampling on its own
        ({"temperature": 0.5, "top_p": 0.8}, 0.5, 0.8),
    ],
)
def test_sampling_keywords_have_meteoras_meaning(kwargs, temperature, top_p):
    fake = FakeLlama(["<rationale_1>x</rationale_1>"])
    gen = generator([METEORA_SHOT], fake, **kwargs)
    gen.generate("q?")
    assert fake.calls[0]["temperature"] == temperature
    assert fake.calls[0]["top_p"] == (1.0 if top_p is None else top_p)
    assert gen.do_sample is (temperature > 0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"do_sample": True, "temperature": 0}, "needs a temperature above 0"),
        ({"do_sample": "yes"}, "do_sample"),
        ({"temperature": 3}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
    ],
)
def test_bad_sampling_settings_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        generator([METEORA_SHOT], **kwargs)


@pytest.mark.parametrize("reply", ["[A] find x</rationale_1>", "<rationale_1>[A] find x</rationale_1>", "[A] find x"])
def test_the_answer_starts_at_the_first_tag_whether_or_not_the_model_repeats_it(reply):
    fake = FakeLlama([reply])
    out = generator([METEORA_SHOT], fake, num_rationales=1).generate("q?")
    assert [(r.label, r.text) for r in out] == [("A", "find x")]
    assert fake.prompt_text().endswith("<rationale_1>")
