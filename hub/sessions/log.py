"""The session log lives in ``hub.store.log`` (the memory store's log); re-exported here."""

from __future__ import annotations

from hub.store.log import EpochT, Event, EventLog, new_epoch

__all__ = ["EpochT", "Event", "EventLog", "new_epoch"]
