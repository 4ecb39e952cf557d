"""The ACP methods a client may call on ``/acp``, and the hub's own ``_hub/*`` methods: the
method table, one module per domain.

Each handler takes the ``Caller`` (``hub.server.methods.caller``: what a handler may use of
the client's connection) and the request's params (an object) and returns the result, or
raises ``RpcFailure`` (``SessionFailure``, ``AgentError``) with the JSON-RPC error to answer;
a ``PeerError`` is answered ``-32602``, a ``TranslationError`` (a request the other side's
protocol version cannot express) ``-32048``, anything else ``-32603`` (a bug, logged with its
traceback; ``hub.protocol.errors``). Handlers validate their params and call the public API
of the caller, the registry and the session. The connection checks the caller's role
(``hub.sessions.arbiter.METHOD_ROLES``) before a handler runs.

``SYNC_METHODS`` are answered inline, in the order they arrive: an attach queues its replay,
its answer and then the live events without yielding to the event loop. ``ASYNC_METHODS`` wait
for the agent and run in the connection's task group. The wire contract is in
``docs/protocol.md``.

The domains: ``initialize``; ``sessions`` (the ACP session methods); ``arbitration``
(policies, the prompt queue); ``lease``; ``rules`` (permission rules); ``sharing`` (share
links); ``audit``; ``dashboard`` (the sessions subscription); ``agents`` (login, logout,
stderr); ``exporting`` (export, import); and ``extensions`` (the handler of the
``_``-prefixed methods the hub passes to an agent).
"""

from __future__ import annotations

from hub.server.methods import (
    agents,
    arbitration,
    audit,
    dashboard,
    exporting,
    initialize,
    lease,
    rules,
    sessions,
    sharing,
)
from hub.server.methods.caller import AsyncHandler, Caller, Result, SyncHandler, failure_answer

__all__ = [
    "ASYNC_METHODS",
    "SYNC_METHODS",
    "AsyncHandler",
    "Caller",
    "Result",
    "SyncHandler",
    "failure_answer",
]

SYNC_METHODS: dict[str, SyncHandler] = {
    **sessions.SYNC,
    **arbitration.SYNC,
    **lease.SYNC,
    **agents.SYNC,
    **sharing.SYNC,
    "_hub/export": exporting.hub_export,
    **rules.SYNC,
    **dashboard.SYNC,
}

ASYNC_METHODS: dict[str, AsyncHandler] = {
    **initialize.ASYNC,
    **sessions.ASYNC,
    **agents.ASYNC,
    **sharing.ASYNC,
    **audit.ASYNC,
    "_hub/import": exporting.hub_import,
}
