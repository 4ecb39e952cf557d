"""The audit trail: one JSON object per line, appended, never rewritten.

Records share links created and revoked, policy changes, sessions created and closed and
every permission decision, each with the time (``ts``, ISO 8601 UTC), the ``event`` name and
the acting principal. ``AuditSink`` is the interface; ``JsonlAuditLog`` appends to a 0600 file
with ``O_APPEND``, so concurrent writers and crashes never interleave or rewrite earlier lines.
The hub also keeps every entry in its store, for reading back (``hub.store.audit``).
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import orjson

log = logging.getLogger("hub.access")


class AuditSink(Protocol):
    def record(self, event: str, **fields: Any) -> None:
        """Append one entry; never raises (a failing disk is logged, not fatal)."""
        ...


class NullAudit:
    """An ``AuditSink`` that keeps nothing (``audit_log = "off"``)."""

    def record(self, event: str, **fields: Any) -> None:
        pass


class MemoryAudit:
    """An ``AuditSink`` that keeps entries in a list (tests of the layers above)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def record(self, event: str, **fields: Any) -> None:
        self.entries.append({"event": event, **fields})


class JsonlAuditLog:
    """Appends entries to ``path`` (created 0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._failed = False

    def record(self, event: str, **fields: Any) -> None:
        entry = {"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), "event": event}
        entry.update(fields)
        line = orjson.dumps(entry, default=str) + b"\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            self._failed = False
        except OSError as exc:
            if not self._failed:
                log.error("! audit log %s: %s", self.path, exc.strerror or exc)
            self._failed = True
