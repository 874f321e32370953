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


# longest first, ties in input order: three (5 chars), four, five (4), one, two (3)
BY_LENGTH = ["three", "four", "five", "one", "two"]


@pytest.mark.parametrize(("batch_size", "batches", "calls"), [
    (2, [["three", "four"], ["five", "one"], ["two"]], [(2, 5), (4, 5), (5, 5)]),
    (5, [BY_LENGTH], [(5, 5)]),
    (64, [BY_LENGTH], [(5, 5)]),
    (1, [[t] for t in BY_LENGTH], [(i, 5) for i in range(1, 6)]),
])
def test_batches_and_progress_counts(table_encoder, batch_size, batches, calls):
    """The encoder sees batches of batch_size texts cut from the length order (so a batch pads
    little); progress gets (texts done, total) after each; the rows come back in input order."""
    encoder = table_encoder(TABLE)
    seen = []
    vectors = embed_batches(encoder, TEXTS, batch_size, lambda done, total: seen.append((done, total)))
    assert encoder.calls == batches
    assert seen == calls
    assert vectors.shape == (5, 3)
    np.testing.assert_array_equal(vectors, normalize_rows(np.asarray([TABLE[t] for t in TEXTS], dtype=np.float32)))


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


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_the_spool_gets_the_same_rows_and_writes_the_npy_np_save_would(table_encoder, tmp_path, batch_size):
    """embed_into writes each row at its chunk id in a temporary file; copied out, the bytes are
    exactly np.save of what embed_batches returns (the build streams vectors instead of holding them)."""
    import io

    from meteora_edge.index.chunk_records import embed_into
    from meteora_edge.index.vector_spool import VectorSpool

    expected = embed_batches(table_encoder(TABLE), TEXTS, batch_size, None)
    with VectorSpool(len(TEXTS), tmp_path) as spool:
        embed_into(spool, table_encoder(TABLE), TEXTS, batch_size, None)
        assert spool.shape == (5, 3)
        assert spool.array().tobytes() == expected.tobytes()
        written, reference = io.BytesIO(), io.BytesIO()
        spool.write_npy(written)
        np.save(reference, expected, allow_pickle=False)
        assert written.getvalue() == reference.getvalue()
        assert list(tmp_path.iterdir()) == []  # unnamed: nothing to clean up, even after a crash
