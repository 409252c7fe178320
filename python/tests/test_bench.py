"""python -m smelt bench's timing: rounds in which every backend runs once,
the first rotating; the order statistics of the CI."""
import pytest

pytest.importorskip("torch")
from smelt import bench  # noqa: E402


def test_rounds_rotate_and_count():
    order = []
    fns = {n: (lambda n=n: (lambda: order.append(n)))() for n in ("a", "b", "c")}
    times = bench.time_rounds(fns, (), 4, 0.0)
    assert all(len(t) == 4 for t in times.values())
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b", "a", "b", "c"]


def test_median_ci():
    med, lo, hi = bench.median_ci([float(x) for x in range(1, 21)])
    assert med == 10.5 and lo < med < hi and lo >= 1 and hi <= 20
