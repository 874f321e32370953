import json
import sys

import pytest

from llm_fakes import FakeLlama, write_gguf
from meteora_edge.errors import BundleError, ConfigError, InputError, MissingExtraError, ModelError
from meteora_edge.pipeline.budget import CUT_TO_FIT, WhitespaceCounter, load_token_counter, pack, truncate_to_tokens

TEXTS = ["one two three", "four five", "six seven eight nine ten eleven", "twelve"]


def test_greedy_packing_skips_what_does_not_fit_and_fills_with_smaller():
    decisions = pack(TEXTS, [0, 2, 1, 3], 6, WhitespaceCounter())
    assert [(d.position, d.outcome) for d in decisions] == [
        (0, "kept"), (2, "skipped: needs 6, 3 left"), (1, "kept"), (3, "kept")]


def test_chunk_larger_than_budget_is_dropped_or_truncated():
    counter = WhitespaceCounter()
    dropped = pack(TEXTS, [2, 0], 4, counter)
    assert [d.outcome for d in dropped] == ["dropped: larger than the budget", "kept"]
    truncated = pack(TEXTS, [2, 0], 4, counter, oversize="truncate")
    assert truncated[0].outcome == "truncated" and truncated[0].text == "six seven eight nine"
    assert truncated[1].outcome == "skipped: needs 3, 0 left"


@pytest.mark.parametrize("oversize", ["drop", "truncate"])
def test_a_budget_smaller_than_every_chunk_cuts_the_first_instead_of_keeping_nothing(oversize):
    decisions = pack(TEXTS[:3], [2, 0, 1], 1, WhitespaceCounter(), oversize=oversize)
    first, *rest = decisions
    if oversize == "drop":
        assert (first.position, first.tokens, first.outcome, first.text) == (2, 1, CUT_TO_FIT, "six")
    else:  # truncate cuts the first chunk itself, as before
        assert (first.position, first.outcome, first.text) == (2, "truncated", "six")
    assert first.kept and not any(d.kept for d in rest)
    assert [d.outcome for d in rest] == ["dropped: larger than the budget"] * 2


def test_the_cut_to_fit_applies_only_when_nothing_else_fits():
    """One chunk that fits whole: the oversize ones before it are dropped as before, nothing is cut."""
    assert _packed([6, 7, 2], 5) == [(0, 6, "dropped: larger than the budget", WORDS[6]),
                                     (1, 7, "dropped: larger than the budget", WORDS[7]), (2, 2, "kept", WORDS[2])]
    assert _packed([6, 7], 5) == [(0, 5, CUT_TO_FIT, "w0 w1 w2 w3 w4"),
                                  (1, 7, "dropped: larger than the budget", WORDS[7])]
    assert pack([], [], 5, WhitespaceCounter()) == []


@pytest.mark.parametrize("oversize", ["drop", "truncate"])
def test_a_first_word_longer_than_the_budget_is_cut_inside_the_word(oversize):
    word = "x" * 40  # 10 tokens (ceil(40 / 4)): no word boundary fits a budget of 5
    [decision] = pack([word + " tail"], [0], 5, WhitespaceCounter(), oversize=oversize)
    assert decision.outcome == CUT_TO_FIT and decision.text == "x" * 20 and decision.tokens == 5


def test_truncate_respects_word_boundaries():
    assert truncate_to_tokens("a  b\tc d", 3, WhitespaceCounter()) == "a  b\tc"
    assert truncate_to_tokens("a b", 0, WhitespaceCounter()) == ""


@pytest.mark.parametrize("bad", [0, -5, 2.5, None])
def test_bad_budgets(bad):
    with pytest.raises(ConfigError):
        pack(TEXTS, [0], bad, WhitespaceCounter())  # type: ignore[arg-type]


def test_counter_loading(tmp_path):
    assert load_token_counter(None).identity == "whitespace"
    with pytest.raises(InputError, match="not found"):
        load_token_counter(tmp_path / "missing.json")
    (tmp_path / "vocab.txt").write_text("x")
    with pytest.raises(InputError, match="neither"):
        load_token_counter(tmp_path / "vocab.txt")
    (tmp_path / "tok.json").write_text("{not a tokenizer")
    with pytest.raises(InputError, match="cannot read tokenizer"):
        load_token_counter(tmp_path / "tok.json")


def test_tokenizer_json_counter_counts_real_subword_tokens(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    vocab = {"[UNK]": 0, "term": 1, "##ination": 2, "notice": 3}
    tok = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    counter = load_token_counter(tmp_path / "tokenizer.json")
    assert counter.count(["termination notice", "notice"]) == [3, 1]


# -- a long whitespace-free run is not one token --------------------------------------------------

def test_a_five_megabyte_word_does_not_pass_a_512_token_budget():
    word = "x" * 5_000_000
    assert WhitespaceCounter().count([word]) == [1_250_000]  # ceil(characters / 4)
    decision = pack([word, "either party may terminate"], [0, 1], 512, WhitespaceCounter())
    assert [d.outcome for d in decision] == ["dropped: larger than the budget", "kept"]


@pytest.mark.parametrize(("text", "tokens"), [
    ("Either party may terminate the agreement.", 6),  # ordinary words: one each, as before
    ("internationalisation", 5),                       # 20 characters: ceil(20 / 4)
    ("a" * 16 + " b", 2),                              # 16 characters is still one word
    ("https://example.org/" + "q" * 80, 25),            # 100 characters
    ("", 0),
])
def test_whitespace_counting(text, tokens):
    assert WhitespaceCounter().count([text]) == [tokens]


def test_the_pipeline_drops_a_huge_word_chunk_under_the_default_counter():
    from meteora_edge import EvidencePipeline, PipelineConfig

    word = "terminate" * 600_000  # one 5.4 MB run that mentions the query word
    config = PipelineConfig(t_max=512, max_chunk_chars=10_000_000, verification="none", use_ecse=False, n_min=None)
    result = EvidencePipeline(config).run("terminate", passages=[word, "either party may terminate"])
    assert result.passages == ["either party may terminate"] and result.tokens <= 512


# -- packing, decision by decision ----------------------------------------------------------------

WORDS = {n: " ".join(f"w{i}" for i in range(n)) for n in range(1, 11)}  # WORDS[n] counts n tokens


def _packed(order_sizes, t_max, oversize="drop"):
    texts = [WORDS[n] for n in order_sizes]
    return [tuple(vars(d).values()) for d in pack(texts, list(range(len(texts))), t_max, WhitespaceCounter(),
                                                  oversize=oversize)]


def test_every_decision_records_position_tokens_outcome_and_text():
    assert _packed([3, 6, 2, 9], 5) == [
        (0, 3, "kept", WORDS[3]),
        (1, 6, "dropped: larger than the budget", WORDS[6]),
        (2, 2, "kept", WORDS[2]),
        (3, 9, "dropped: larger than the budget", WORDS[9]),
    ]
    assert _packed([3, 4, 1], 5) == [(0, 3, "kept", WORDS[3]), (1, 4, "skipped: needs 4, 2 left", WORDS[4]),
                                     (2, 1, "kept", WORDS[1])]


def test_a_chunk_of_exactly_the_budget_is_skipped_not_truncated_when_it_no_longer_fits():
    assert _packed([2, 5], 5, "truncate") == [(0, 2, "kept", WORDS[2]), (1, 5, "skipped: needs 5, 3 left", WORDS[5])]


def test_truncation_fills_the_room_left_and_counts_against_later_chunks():
    assert _packed([3, 10, 1], 5, "truncate") == [
        (0, 3, "kept", WORDS[3]),
        (1, 2, "truncated", "w0 w1"),
        (2, 1, "skipped: needs 1, 0 left", WORDS[1]),
    ]
    assert _packed([4, 10], 5, "truncate") == [(0, 4, "kept", WORDS[4]), (1, 1, "truncated", "w0")]
    assert _packed([5, 10], 5, "truncate") == [(0, 5, "kept", WORDS[5]),
                                               (1, 10, "dropped: larger than the budget", WORDS[10])]


def test_an_oversize_chunk_whose_first_word_does_not_fit_is_dropped_not_cut_to_nothing():
    word = "x" * 40  # 10 tokens (ceil(40 / 4))
    decisions = pack(["a b c d", word + " tail"], [0, 1], 5, WhitespaceCounter(), oversize="truncate")
    assert [(d.outcome, d.tokens, d.text) for d in decisions] == [
        ("kept", 4, "a b c d"), ("dropped: larger than the budget", 11, word + " tail")]


@pytest.mark.parametrize(("limit", "expected"), [(-1, ""), (0, ""), (1, "a"), (2, "a  b"), (4, "a  b\tc d"), (9, "a  b\tc d")])
def test_truncate_to_tokens_keeps_the_longest_word_prefix(limit, expected):
    assert truncate_to_tokens("a  b\tc d ", limit, WhitespaceCounter()) == expected


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"t_max": 0}, "t_max must be a positive integer, got 0"),
    ({"t_max": True}, "t_max must be a positive integer, got True"),
    ({"t_max": 5, "oversize": "cut"}, "oversize must be 'drop' or 'truncate', got 'cut'"),
])
def test_bad_pack_settings_say_what_is_wrong(kwargs, message):
    with pytest.raises(ConfigError) as info:
        pack(TEXTS, [0], counter=WhitespaceCounter(), **kwargs)
    assert str(info.value) == message


# -- counters --------------------------------------------------------------------------------------

def test_the_whitespace_counter_is_chosen_by_name():
    assert isinstance(load_token_counter("whitespace"), WhitespaceCounter)


def test_a_bundle_counts_with_its_encoder_tokenizer_without_special_tokens_padding_or_truncation(tmp_path):
    pytest.importorskip("tokenizers")
    from tiny_onnx import make_bundle

    counter = load_token_counter(make_bundle(tmp_path / "b"))  # the tokenizer pads to 16 and truncates at 6
    assert counter.identity == "tokenizer.json:tokenizer.json"
    assert counter.count(["either party may terminate the agreement after notice", "fees"]) == [8, 1]


def test_an_unreadable_tokenizer_names_the_file_and_the_first_200_characters_of_the_reason(tmp_path):
    pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"version": "X" * 300, "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}}))
    with pytest.raises(InputError) as info:
        load_token_counter(path)
    head = f"cannot read tokenizer {path}: "
    assert str(info.value).startswith(head + "Unknown tokenizer version 'XXX") and len(str(info.value)) == len(head) + 200


def test_a_tokenizer_without_an_unknown_token_is_an_input_error_naming_the_file(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "words.json"
    tokenizers.Tokenizer(tokenizers.models.WordLevel({"fees": 0})).save(str(path))
    with pytest.raises(InputError, match=f"^tokenizer {path} cannot encode words outside its vocabulary"):
        load_token_counter(path)


def test_without_the_tokenizers_package_the_error_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(MissingExtraError) as info:
        load_token_counter(tmp_path / "tokenizer.json")
    assert (info.value.module, info.value.extra) == ("tokenizers", "onnx")


class _VocabLlama(FakeLlama):
    """The fake's byte tokens, plus a BOS token (0) when asked for one."""

    def tokenize(self, text, add_bos=True, special=False):
        return [0] * add_bos + super().tokenize(text, add_bos=add_bos, special=special)


class _FakeLlamaCpp:
    """Stands in for the llama_cpp module: records how the vocabulary is loaded."""

    def __init__(self, raises=None):
        self.raises = raises
        self.loaded = []

    def Llama(self, **kwargs):  # noqa: N802 - the module's class name
        if self.raises:
            raise self.raises
        self.loaded.append(kwargs)
        return _VocabLlama()


@pytest.fixture
def fake_llama_cpp(monkeypatch):
    from meteora_edge.models import llm_model

    fake = _FakeLlamaCpp()
    monkeypatch.setattr(llm_model, "import_llama_cpp", lambda: fake)
    return fake


def test_a_gguf_counts_with_its_vocabulary_only_and_without_bos(tmp_path, fake_llama_cpp):
    path = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"})
    counter = load_token_counter(path)
    assert fake_llama_cpp.loaded == [{"model_path": str(path), "vocab_only": True, "verbose": False}]
    assert counter.identity == "gguf:m.gguf"
    assert counter.count(["ab", "é", "<|im_end|>", ""]) == [2, 2, 10, 0]  # no BOS; special tokens are text


def test_a_bundle_with_an_llm_counts_with_its_gguf(tmp_path, fake_llama_cpp):
    pytest.importorskip("tokenizers")
    from tiny_onnx import make_bundle
    from meteora_edge.models.bundle import Component, add_component, file_entry

    bundle = make_bundle(tmp_path / "b")
    (bundle / "llm").mkdir()
    write_gguf(bundle / "llm" / "m.gguf", {"general.architecture": "llama"})
    add_component(bundle, "llm", Component(kind="llm", files={"model": file_entry(bundle, "llm/m.gguf")}))
    assert load_token_counter(bundle).identity == "gguf:m.gguf"
    assert fake_llama_cpp.loaded[0]["model_path"] == str(bundle / "llm" / "m.gguf")


def test_a_bundle_without_a_tokenizer_is_refused(tmp_path):
    from meteora_edge.models.bundle import MANIFEST_NAME

    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"format": "meteora-edge-bundle", "format_version": 1,
                                                      "components": {}}))
    with pytest.raises(BundleError) as info:
        load_token_counter(tmp_path)
    assert str(info.value) == f"bundle {tmp_path} has neither an llm nor an encoder tokenizer to count tokens with"


@pytest.mark.parametrize(("content", "error", "message"), [
    (None, InputError, "GGUF file not found: {path}"),
    (b"GGML" + b"\0" * 16, ModelError, "{path} is not a GGUF file (bad magic bytes)"),
])
def test_a_gguf_counter_checks_the_file_first(tmp_path, fake_llama_cpp, content, error, message):
    from meteora_edge.pipeline.budget import GgufTokenCounter

    path = tmp_path / "m.gguf"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error) as info:
        GgufTokenCounter(path)
    assert str(info.value) == message.format(path=path) and fake_llama_cpp.loaded == []


def test_a_vocabulary_llama_cpp_cannot_load_is_a_model_error(tmp_path, monkeypatch):
    from meteora_edge.models import llm_model

    monkeypatch.setattr(llm_model, "import_llama_cpp", lambda: _FakeLlamaCpp(raises=ValueError("bad vocab")))
    path = write_gguf(tmp_path / "m.gguf", {"general.architecture": "llama"})
    with pytest.raises(ModelError) as info:
        load_token_counter(path)
    assert str(info.value) == f"cannot load the vocabulary of {path}: bad vocab"


def test_a_text_with_a_word_never_packs_into_nothing_and_never_over_the_budget():
    """Property: whatever the texts, order and budget, something is kept and the budget holds."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    words = st.text(alphabet="ab é漢", min_size=1, max_size=60).filter(lambda t: t.strip())

    @hypothesis.settings(max_examples=200, deadline=None, derandomize=True)
    @hypothesis.given(texts=st.lists(words, min_size=1, max_size=6), t_max=st.integers(1, 12),
                      oversize=st.sampled_from(["drop", "truncate"]))
    def check(texts, t_max, oversize):
        counter = WhitespaceCounter()
        decisions = pack(texts, list(range(len(texts)))[::-1], t_max, counter, oversize=oversize)
        kept = [d for d in decisions if d.kept]
        assert kept and sum(d.tokens for d in kept) <= t_max
        assert all(d.text and d.text in texts[d.position] and counter.count([d.text])[0] == d.tokens for d in kept)

    check()
