"""embed_batches: texts embedded a batch at a time, progress reported, rows L2-normalised in float32."""

import numpy as np
import pytest

from meteora_edge.errors import ModelError
from meteora_edge.index.chunk_records import embed_batches
from meteora_edge.models.encoders import embed
from meteora_edge.models.vectors import normalize_rows

# Raw (unnormalised) encoder outputs. The first row normalises to other float32 values when the
# division runs in float64 and is rounded afterwards, so the exact-bits test below can tell them apart.
TABLE = {
    "one": [0.880111575126648, -0.9247340559959412, 4.4829583168029785],
    "two": [3.0, 4.0, 0.0],
    "three": [0.0, 0.0, 0.0],
    "four": [-1.0, 2.0, -2.0],
    "five": [1e-3, 0.0, 1e-3],
}
TEXTS = list(TABLE)


@pytest.mark.parametrize(("batch_size", "batches", "calls"), [
    (2, [["one", "two"], ["three", "four"], ["five"]], [(2, 5), (4, 5), (5, 5)]),
    (5, [TEXTS], [(5, 5)]),
    (64, [TEXTS], [(5, 5)]),
    (1, [[t] for t in TEXTS], [(i, 5) for i in range(1, 6)]),
])
def test_batches_and_progress_counts(table_encoder, batch_size, batches, calls):
    """The encoder sees consecutive batches of batch_size texts; progress gets (texts done, total) after each."""
    encoder = table_encoder(TABLE)
    seen = []
    vectors = embed_batches(encoder, TEXTS, batch_size, lambda done, total: seen.append((done, total)))
    assert encoder.calls == batches
    assert seen == calls
    assert vectors.shape == (5, 3)


def test_without_progress_nothing_is_reported(table_encoder):
    """progress=None is allowed: the vectors are the same as with a callback."""
    with_none = embed_batches(table_encoder(TABLE), TEXTS, 2, None)
    with_callback = embed_batches(table_encoder(TABLE), TEXTS, 2, lambda done, total: None)
    assert np.array_equal(with_none, with_callback)


def test_rows_are_normalised_in_float32_bit_for_bit_as_one_call_would(table_encoder):
    """Batching changes nothing: the rows are exactly normalize_rows of the encoder's float32 output
    (the normalisation queries get), whatever the batch size; a zero row stays zero."""
    expected = normalize_rows(embed(table_encoder(TABLE), TEXTS))
    assert expected.dtype == np.float32
    for batch_size in (1, 2, 3, 5):
        vectors = embed_batches(table_encoder(TABLE), TEXTS, batch_size, None)
        assert vectors.dtype == np.float32
        assert vectors.tobytes() == expected.tobytes()
    np.testing.assert_allclose(vectors[1], [0.6, 0.8, 0.0], rtol=1e-6)
    assert vectors[2].tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(np.linalg.norm(vectors[[0, 1, 3, 4]], axis=1), 1.0, rtol=1e-6)


def test_float64_encoder_output_comes_back_float32(table_encoder):
    """An encoder returning float64 still yields float32 rows."""

    def encoder(texts):
        return np.asarray([TABLE[t] for t in texts], dtype=np.float64)

    vectors = embed_batches(encoder, TEXTS, 3, None)
    assert vectors.dtype == np.float32
    assert vectors.tobytes() == normalize_rows(embed(table_encoder(TABLE), TEXTS)).tobytes()


def test_a_bad_batch_from_the_encoder_is_refused(table_encoder):
    """An encoder answering with the wrong number of rows raises ModelError, naming the shapes."""

    def short(texts):
        return np.ones((len(texts) - 1, 3), dtype=np.float32) if len(texts) > 1 else np.ones((1, 3))

    with pytest.raises(ModelError, match=r"encoder returned shape \(1, 3\) for 2 texts; expected \(2, dim\)"):
        embed_batches(short, TEXTS, 2, None)
