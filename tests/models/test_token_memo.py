"""The word-piece vectors the pooled pass leaves in memory for the token cover.

Tier 1 runs the tiny self-attention graph of ``test_encoder_batching`` (a token's vector depends
on the other tokens, so a wrong text's or a padded row's vectors would show)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")

from test_encoder_batching import MIXED, write_attention_model  # noqa: E402
from tiny_onnx import write_tokenizer  # noqa: E402

from meteora_edge.errors import ConfigError  # noqa: E402
from meteora_edge.models.onnx_encoder import OnnxEncoder  # noqa: E402
from meteora_edge.models.token_memo import TokenMemo  # noqa: E402


def counted(encoder: OnnxEncoder) -> list[int]:
    """Count the texts the model runs on (each call of ``_hidden`` adds its batch size)."""
    runs: list[int] = []
    hidden = encoder._hidden
    encoder._hidden = lambda batch, session=None: (runs.append(len(batch)), hidden(batch, session))[1]
    return runs


@pytest.fixture()
def files(tmp_path):
    return write_attention_model(tmp_path / "att.onnx"), write_tokenizer(tmp_path / "tokenizer.json", truncate_at=None)


@pytest.mark.parametrize(("batch_size", "sessions"), [(8, 1), (3, 2), (1, 1)])
def test_after_encode_the_piece_vectors_come_from_memory_and_equal_a_fresh_run(files, batch_size, sessions):
    encoder = OnnxEncoder(*files, batch_size=batch_size, sessions=sessions)
    fresh = OnnxEncoder(*files, token_memo_bytes=0)
    encoder.encode(MIXED)
    runs = counted(encoder)
    remembered = encoder.token_vectors([MIXED[4], MIXED[0], MIXED[4]])
    assert runs == []  # no model run: the pooled pass left them
    expected = fresh.token_vectors([MIXED[4], MIXED[0], MIXED[4]])
    pieces = fresh.pieces([MIXED[4], MIXED[0], MIXED[4]])
    for got, want, words in zip(remembered, expected, pieces):
        assert got.shape == want.shape == (len(words), 8)
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert not remembered[0].flags.writeable  # shared with later readers: nobody may change it
    assert len(fresh.token_memo) == 0  # a memo of 0 bytes keeps nothing


def test_only_the_texts_not_in_memory_run_and_a_repeated_text_runs_once(files):
    encoder = OnnxEncoder(*files, batch_size=1)
    encoder.encode(MIXED[:2])
    runs = counted(encoder)
    vectors = encoder.token_vectors([MIXED[0], MIXED[5], MIXED[5], MIXED[1]])
    assert sum(runs) == 1  # only MIXED[5]
    np.testing.assert_array_equal(vectors[1], vectors[2])
    assert encoder.token_memo.get(MIXED[5]) is not None


def test_with_no_memo_every_call_runs_the_model(files):
    encoder = OnnxEncoder(*files, token_memo_bytes=0)
    encoder.encode(MIXED[:3])
    runs = counted(encoder)
    encoder.token_vectors(MIXED[:3])
    encoder.token_vectors(MIXED[:3])
    assert sum(runs) == 6 and len(encoder.token_memo) == 0


def test_the_memo_forgets_the_least_recently_used_text_first_and_keeps_its_bound():
    memo = TokenMemo(max_bytes=3 * 400)
    rows = {name: np.ones((10, 10), np.float32) for name in "abcd"}  # 400 bytes each
    for name in "abc":
        memo.put(name, rows[name])
    assert memo.get("a") is rows["a"]  # "a" is now the most recently used
    memo.put("d", rows["d"])
    assert memo.get("b") is None and {n for n in "acd" if memo.get(n) is not None} == set("acd")
    assert memo.nbytes == 1200 and len(memo) == 3
    memo.put("huge", np.ones((100, 100), np.float32))  # larger than the whole memo: not kept, nothing lost
    assert memo.get("huge") is None and len(memo) == 3
    memo.put("a", np.zeros((5, 10), np.float32))  # replacing a text frees its old bytes
    assert memo.nbytes == 1000
    memo.clear()
    assert len(memo) == 0 and memo.nbytes == 0


@pytest.mark.parametrize("bad", [-1, True, 1.5, "32MB", None])
def test_a_bad_memo_size_is_refused_in_one_line(files, bad):
    with pytest.raises(ConfigError, match="token_memo_bytes must be an integer >= 0"):
        OnnxEncoder(*files, token_memo_bytes=bad)
