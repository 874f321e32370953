import hashlib

import numpy as np
import pytest

from meteora_edge import ConfigError, HashingEncoder


def _bucket_and_sign(token: str, n: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
    return h % n, (-1.0 if h >= 2**63 else 1.0)


def test_single_token_lands_in_its_blake2b_bucket_with_its_sign():
    enc = HashingEncoder()
    vec = enc.encode(["Termination"])[0]
    bucket, sign = _bucket_and_sign("termination", 384)
    expected = np.zeros(384, dtype=np.float32)
    expected[bucket] = sign
    np.testing.assert_array_equal(vec, expected)


def test_counts_sum_and_rows_are_unit_length():
    enc = HashingEncoder(n_features=64)
    vec = enc.encode(["fee fee FEE, notice!"])[0]
    b_fee, s_fee = _bucket_and_sign("fee", 64)
    b_notice, s_notice = _bucket_and_sign("notice", 64)
    raw = np.zeros(64)
    raw[b_fee] += 3 * s_fee
    raw[b_notice] += s_notice
    np.testing.assert_allclose(vec, raw / np.linalg.norm(raw), rtol=1e-6)
    assert np.linalg.norm(vec) == pytest.approx(1.0)


def test_text_without_tokens_gives_zero_row():
    out = HashingEncoder().encode(["", "—!!"])
    assert out.shape == (2, 384)
    assert not out.any()


def test_tokenisation_is_ascii_word_runs():
    enc = HashingEncoder()
    np.testing.assert_array_equal(enc.encode(["café_x"])[0], enc.encode(["caf  _x"])[0])


@pytest.mark.parametrize("bad", [0, -3, 2.5, "384", True])
def test_bad_feature_counts_are_refused(bad):
    with pytest.raises(ConfigError, match="n_features"):
        HashingEncoder(n_features=bad)
