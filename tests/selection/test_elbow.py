import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meteora_edge import statistical_elbow

# the numeric core never warns (a 0/0 from a branch taken too early would)
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


@pytest.mark.parametrize(
    "scores, z, expected",
    [
        ([], 1.0, None),
        ([0.5], 1.0, 0),
        ([0.9, 0.1], 1.0, 1),
        ([0.9, 0.88, 0.86, 0.3, 0.28, 0.27], 1.0, 2),
        ([0.9, 0.3, 0.29, 0.28, 0.27], 1.0, 0),
        # equal drops: std 0 -> second differences all 0 -> argmax 0
        ([1.0, 0.75, 0.5, 0.25], 1.0, 0),
        # constant scores: same fallback
        ([0.7, 0.7, 0.7], 1.0, 0),
        # no drop stands out at a high threshold: second-difference argmax
        ([1.0, 0.9, 0.7, 0.4], 5.0, 0),
        ([1.0, 0.95, 0.9, 0.5, 0.45], 5.0, 1),
    ],
)
def test_elbow_table(scores, z, expected):
    assert statistical_elbow(scores, z_threshold=z) == expected


def test_the_elbow_is_computed_in_double_precision_from_float32_scores():
    # the biggest drop stands out by 1e-9 over the threshold: far above float64 rounding,
    # far below float32's (which would miss it and fall back to the second differences)
    scores = np.array([0.8, 0.58, 0.48, 0.43, 0.24, 0.16, 0.09], dtype=np.float32)
    values = [float(s) for s in scores]
    drops = [a - b for a, b in zip(values, values[1:])]
    mean = sum(drops) / len(drops)
    std = (sum((d - mean) ** 2 for d in drops) / len(drops)) ** 0.5
    z = [(d - mean) / std for d in drops]
    assert statistical_elbow(scores, z_threshold=z[0] - 1e-9) == 0
    assert statistical_elbow(scores, z_threshold=z[0] + 1e-9) != 0


def _reference(values, z):
    """A plain-loop restatement of DESIGN.md, independent of the numpy version."""
    n = len(values)
    if n == 0:
        return None
    if n <= 2:
        return n - 1
    d = [values[i] - values[i + 1] for i in range(n - 1)]
    mean = sum(d) / len(d)
    std = (sum((x - mean) ** 2 for x in d) / len(d)) ** 0.5
    if std > 0:
        for i, x in enumerate(d):
            if (x - mean) / std > z:
                return i
    second = [d[i + 1] - d[i] for i in range(len(d) - 1)]
    best = 0
    for i, x in enumerate(second):
        if x > second[best]:
            best = i
    return best


scores_lists = st.lists(st.floats(min_value=-1, max_value=1, allow_nan=False), max_size=40).map(
    lambda xs: sorted(xs, reverse=True)
)


@settings(max_examples=300, deadline=None)
@given(scores=scores_lists, z=st.floats(min_value=0.0, max_value=3.0))
def test_elbow_matches_reference_and_stays_in_range(scores, z):
    got = statistical_elbow(scores, z_threshold=z)
    want = _reference(scores, z)
    if want is None:
        assert got is None
        return
    assert 0 <= got <= len(scores) - 1
    if got != want:
        # floating point can split near-ties differently; both must then be near-ties
        d = -np.diff(np.asarray(scores, dtype=np.float64))
        zs = (d - d.mean()) / d.std() if d.std() > 0 else np.zeros_like(d)
        assert abs(zs[min(got, len(zs) - 1)] - zs[min(want, len(zs) - 1)]) < 1e-6 or np.isclose(
            d.std(), 0, atol=1e-12
        )


@given(scores=scores_lists)
def test_elbow_is_deterministic(scores):
    assert statistical_elbow(scores) == statistical_elbow(list(scores))
