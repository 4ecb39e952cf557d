"""``AgentError``: an agent operation that failed, carrying the JSON-RPC error to report.

The session layer turns ``error`` into the answer it owes its own client. Three sources:

* the agent answered the request with a JSON-RPC error (``error`` is the agent's, verbatim);
* the agent is down, could not be started or died with the request in flight
  (``AGENT_UNAVAILABLE``, -32042);
* the agent did not advertise the capability the operation needs (``UNSUPPORTED``, -32048);
* the hub refused the request before it reached the agent (``refusal``): malformed
  (``INVALID_PARAMS``, -32602, the client's fault) or well-formed but without a form in the
  agent's protocol version (``UNSUPPORTED``, -32048: a v2-only construct for a v1 agent).
"""

from __future__ import annotations

from typing import Any

from hub.protocol.errors import (
    AGENT_UNAVAILABLE,
    UNSUPPORTED,
    InvalidParams,
    RpcFailure,
    TranslationError,
    hub_error,
    invalid_params,
)

__all__ = ["AgentError", "agent_unavailable", "refusal", "unsupported"]


class AgentError(RpcFailure):
    """An agent operation failed; ``error`` is the JSON-RPC error object to pass on."""


def agent_unavailable(agent: str, reason: str, **data: Any) -> AgentError:
    """The agent process is down, could not be started, or died mid-request."""
    return AgentError(
        hub_error(
            AGENT_UNAVAILABLE, f"Agent '{agent}' is unavailable: {reason}", {"agent": agent, **data}
        )
    )


def unsupported(agent: str, operation: str, needs: str) -> AgentError:
    """The agent did not advertise what ``operation`` needs."""
    return AgentError(
        hub_error(
            UNSUPPORTED,
            f"Agent '{agent}' does not support {operation} (it does not advertise {needs})",
            {"agent": agent, "operation": operation},
        )
    )


def refusal(agent: str, exc: InvalidParams | TranslationError) -> AgentError:
    """A request refused before it reached the agent: ``exc`` from checking or translating it.

    ``InvalidParams`` (malformed) is ``-32602``; ``TranslationError`` (well-formed, but the
    agent's protocol version cannot express it) is ``-32048``: neither is the hub's bug.
    """
    if isinstance(exc, TranslationError):
        return AgentError(
            hub_error(
                UNSUPPORTED,
                f"Agent '{agent}' cannot take this request: {exc}",
                {"agent": agent, "reason": str(exc)},
            )
        )
    return AgentError(invalid_params(str(exc)))
