"""Small statistics helpers: percentiles of latency samples, medians of runs."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["median", "percentile"]


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100, nearest rank) of ``samples``; NaN when empty."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (the mean of the middle two for an even count); NaN if empty."""
    ordered = sorted(v for v in values if v == v)
    n = len(ordered)
    if n == 0:
        return float("nan")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
