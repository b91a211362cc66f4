"""``round_at``: the round at one micro-batch size, read from the sizes a run measured.

The points are (micro-batch size, round s) as phases give them: a PP8 run's trip round at 4
and 8 requests a slot (22.1 and 34.3 ms, graphs), and an eager phase at 16 (98.9 ms).
"""

from __future__ import annotations

import pytest

from toolkit.analyze.effects import round_at

PP8 = [(4.0, 0.0221), (8.0, 0.0343), (8.0, 0.0345), (16.0, 0.0989)]


def test_a_measured_size_is_read_as_its_median() -> None:
    assert round_at(PP8, 8) == (pytest.approx(0.0344), (8.0,))
    assert round_at(PP8, 8.4) == (pytest.approx(0.0344), (8.0,))  # within half a request


def test_between_two_measured_sizes_the_line_joins_the_nearest() -> None:
    # 6 lies between 4 (22.1 ms) and 8 (34.4 ms, the median of its two)
    assert round_at(PP8, 6) == (pytest.approx(0.0221 + (0.0344 - 0.0221) / 2), (4.0, 8.0))
    # 12 between 8 and the eager 16: the run's own rounds, eager included
    assert round_at(PP8, 12) == (pytest.approx((0.0344 + 0.0989) / 2), (8.0, 16.0))


@pytest.mark.parametrize("size", [2.0, 17.0, 64.0])
def test_outside_the_measured_sizes_nothing_is_read(size: float) -> None:
    """How the round grows beyond what the run measured is not measured."""
    assert round_at(PP8, size) is None


def test_unusable_points_are_left_out() -> None:
    assert round_at([(0.0, 0.03), (8.0, float("nan")), (8.0, -1.0)], 8) is None
    assert round_at([], 8) is None
