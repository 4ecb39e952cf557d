"""The token bucket, on a clock the test moves by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.ratelimit import TokenBucket


def test_a_burst_is_granted_then_refused_with_the_time_to_wait() -> None:
    bucket = TokenBucket(rate=10, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.1)
    # Nothing was taken by the refusal: after exactly that wait one token is back.
    assert bucket.take(0.1) == 0.0
    assert bucket.take(0.1) == pytest.approx(0.1)


def test_refill_stops_at_the_burst() -> None:
    bucket = TokenBucket(rate=1, burst=2, now=0.0)
    assert bucket.take(1000.0) == 0.0
    assert bucket.take(1000.0) == 0.0
    assert bucket.take(1000.0) > 0


def test_a_clock_that_goes_backwards_grants_nothing_extra() -> None:
    bucket = TokenBucket(rate=1, burst=1, now=10.0)
    assert bucket.take(10.0) == 0.0
    assert bucket.take(5.0) > 0
    assert bucket.take(10.5) > 0
    assert bucket.take(11.0) == 0.0


def test_a_zero_rate_disables_the_limit() -> None:
    bucket = TokenBucket(rate=0, burst=1, now=0.0)
    assert all(bucket.take(0.0) == 0.0 for _ in range(1000))


@given(
    rate=st.floats(0.5, 1000),
    burst=st.integers(1, 100),
    steps=st.lists(st.floats(0, 2), max_size=200),
)
def test_never_more_than_burst_plus_rate_times_elapsed(
    rate: float, burst: int, steps: list[float]
) -> None:
    bucket = TokenBucket(rate=rate, burst=burst, now=0.0)
    now = 0.0
    granted = 0
    for step in steps:
        now += step
        while bucket.take(now) == 0.0:
            granted += 1
            assert granted <= burst + rate * now + 1e-6
