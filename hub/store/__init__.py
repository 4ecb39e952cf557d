"""The ``EventStore`` seam (DESIGN section 8): where session logs and snapshots will be kept.

Not built yet: today every session's log and folded state live in memory
(``hub.sessions.log.EventLog`` and ``hub.protocol.state.SessionState``), which is the embedded
default. The sqlite (``--data-dir``) and Redis (multi-node) stores will implement the same seam.
"""
