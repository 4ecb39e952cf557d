"""The garbage collector's shape for a serving hub (``hub.cli.server.tune_gc``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from hub.cli.server import GC_THRESHOLDS, tune_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_start_up_objects_leave_the_generations_and_full_collections_come_later() -> None:
    gc.unfreeze()
    before = len(gc.get_objects())
    tune_gc()
    # What start-up made is frozen: no full collection walks it again.
    assert gc.get_freeze_count() > 0
    assert len(gc.get_objects()) < before
    # The oldest generation waits for 100 middle-generation collections, not Python's 10.
    assert gc.get_threshold() == GC_THRESHOLDS
    assert GC_THRESHOLDS[2] > 10
