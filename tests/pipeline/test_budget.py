import pytest

from meteora_edge.pipeline.budget import WhitespaceCounter, load_token_counter, pack, truncate_to_tokens
from meteora_edge.errors import ConfigError, InputError

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


def test_budget_smaller_than_every_chunk_keeps_nothing():
    assert all(d.outcome.startswith("dropped") for d in pack(TEXTS[:3], [0, 1, 2], 1, WhitespaceCounter()))


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
