"""drop_duplicates: a greedy walk in priority order that keeps a chunk unless a kept one is too similar."""

from __future__ import annotations

import numpy as np
import pytest

from meteora_edge.pipeline.prioritise import drop_duplicates

# unit vectors at known angles: cos(a, b) = 0.6, cos(a, c) = 0.0, cos(b, c) = 0.8
A, B, C = [1.0, 0.0], [0.6, 0.8], [0.0, 1.0]


@pytest.mark.parametrize(("order", "theta", "kept", "absorbed"), [
    ([0, 1, 2], 0.9, [0, 1, 2], {}),
    ([0, 1, 2], 0.7, [0, 1], {2: (1, 0.8)}),        # c is absorbed by b, the kept row it is closest to
    ([2, 1, 0], 0.7, [2, 0], {1: (2, 0.8)}),        # the order decides who stays
    ([0, 1, 2], 0.5, [0, 2], {1: (0, 0.6)}),
    ([1, 0, 2], 0.5, [1], {0: (1, 0.6), 2: (1, 0.8)}),
    ([2, 0], 0.5, [2, 0], {}),                        # positions not in order are ignored
    ([], 0.5, [], {}),
])
def test_the_walk_keeps_and_attributes_by_hand(order, theta, kept, absorbed):
    got_kept, got_absorbed = drop_duplicates(np.array([A, B, C]), order, theta)
    assert got_kept == kept
    assert {k: (v[0], pytest.approx(v[1])) for k, v in got_absorbed.items()} == absorbed
    assert all(type(p) is int for p in got_kept) and all(type(v[0]) is int for v in got_absorbed.values())


def test_a_duplicate_is_attributed_to_its_closest_kept_chunk_not_the_first():
    # kept so far: a (cos 0.6 with d) and b (cos 0.96 with d); only b is above theta
    d = [0.28, 0.96]
    kept, absorbed = drop_duplicates(np.array([A, C, d]), [0, 1, 2], 0.9)
    assert kept == [0, 1]
    assert absorbed == {2: (1, pytest.approx(0.96))}


def test_an_exact_copy_is_a_duplicate_just_below_theta_1_even_from_float32_vectors():
    # cosines are computed in float64: a float32 row's cosine with itself can come out at
    # 1 - 6e-8, which would let a copy through at theta = 1 - 1e-9
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(20, 384)).astype(np.float32)
    for row in vectors:
        kept, absorbed = drop_duplicates(np.stack([row, row]), [0, 1], 1 - 1e-9)
        assert kept == [0] and list(absorbed) == [1]


def test_spare_is_asked_only_about_rows_above_theta_with_the_rows_kept_so_far():
    asked = []

    def spare(position, kept):
        asked.append((position, kept))
        return position == 2  # c brings something the kept rows lack; d does not

    d = [0.28, 0.96]
    kept, absorbed = drop_duplicates(np.array([A, B, C, d]), [1, 0, 2, 3], 0.7, spare=spare)
    assert kept == [1, 0, 2]
    assert absorbed == {3: (2, pytest.approx(0.96))}  # absorbed by its closest kept row, c
    assert asked == [(2, [1, 0]), (3, [1, 0, 2])]  # a (cos 0.6 with b) is below theta: not asked
