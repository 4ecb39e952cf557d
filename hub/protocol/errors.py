"""The error tree of acp-hub's protocol core, and JSON-RPC error objects.

Theory of operation
-------------------
Two kinds of trouble, kept apart as h11 does, and answered differently:

* ``PeerError`` - the *peer* sent something we cannot accept (a line over the limit,
  invalid JSON, a message of the wrong shape, a malformed payload of a known variant).
  Answered per JSON-RPC (``-32700`` with ``id: null`` for unparseable input, ``-32600`` for
  a message of the wrong shape, ``-32602`` for malformed params) and logged in one concise
  line with a ``!`` prefix naming the peer, never with a traceback.
* ``LocalError`` - *we* cannot do what was asked. ``TranslationError`` is the one the code
  raises: a well-formed value that has no faithful form in the other side's protocol version
  (a v2-only content block in a prompt for a v1 agent, say). Where a request needs the
  translation the caller answers it as a refusal, ``UNSUPPORTED`` (``-32048``), in one log
  line (``hub.agents.errors.refusal``, the server's error answer). Any other ``LocalError``,
  or any exception outside this tree, that reaches a request handler is our bug: answered
  ``-32603`` (``internal_error``) and logged with its traceback.

``RpcFailure`` is the base of the failures that carry the exact JSON-RPC error their
caller is owed (``AgentError``, ``SessionFailure``); they are expected and answered verbatim.

``RpcError`` is the wire-level error object (``{"code", "message", "data"?}``); every
code the ACP schema defines has a named constructor, and the hub's own codes (role
refusals, busy sessions, ...) live in the ``-32040..-32059`` range documented in
``docs/protocol.md``.

    ProtocolError
    +-- PeerError                  -32700 / -32600 / -32602, one log line
    |   +-- LineTooLong        a newline-delimited frame longer than the limit
    |   +-- ParseError         bytes that are not JSON
    |   +-- InvalidMessage     JSON that is not a JSON-RPC message
    |   +-- InvalidParams      a known method or variant with a malformed payload
    |   +-- VersionError       a protocol version we cannot speak
    +-- LocalError                 -32603 and a traceback, unless a caller names the refusal
        +-- TranslationError   no faithful rendering for the target version (-32048)
    RpcFailure                     its own ``error``, verbatim
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# JSON-RPC 2.0 and ACP schema codes (schema ``ErrorCode``, identical in v1 and v2).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002

# acp-hub's own codes (documented in docs/protocol.md, "Error codes").
FORBIDDEN = -32040  # the caller's role does not allow this
SESSION_BUSY = -32041  # a prompt while the agent is busy under the `reject` policy
AGENT_UNAVAILABLE = -32042  # the agent process is down or could not be started
SESSION_LOST = -32043  # the agent lost the session and could not re-attach it
RATE_LIMITED = -32044  # too many messages or prompts
NOT_LEASE_HOLDER = -32045  # a prompt under the `lease` policy from a non-holder
QUEUE_FULL = -32046  # the prompt queue of the session is full
NOT_ATTACHED = -32047  # the caller is not attached to the session
UNSUPPORTED = -32048  # the agent does not support this operation
STALE_ANSWER = -32049  # an answer to a request that is already resolved or withdrawn
LIMIT_REACHED = -32050  # a configured limit (sessions, session state) is reached
NOT_OWNER = -32051  # another hub node owns the session and did not answer (or it is not forwarded)
STORE_UNAVAILABLE = -32052  # the store did not take a change (a share link) in time


class ProtocolError(Exception):
    """Base class of every error the protocol core raises."""


class PeerError(ProtocolError):
    """The peer sent something we cannot accept."""


class LocalError(ProtocolError):
    """We cannot do what was asked; unless a caller names the refusal, our bug (-32603)."""


class LineTooLong(PeerError):
    """A newline-delimited frame exceeded the configured maximum length.

    ``length`` is the number of bytes seen before the frame was abandoned (at least
    ``limit + 1``); the rest of the line up to the next newline is discarded.
    """

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"line of {length}+ bytes exceeds the limit of {limit} bytes")
        self.length = length
        self.limit = limit


class ParseError(PeerError):
    """Bytes that are not valid JSON (answered with -32700 and ``id: null``)."""


class InvalidMessage(PeerError):
    """Valid JSON that is not a JSON-RPC 2.0 message (answered with -32600)."""


class InvalidParams(PeerError):
    """A known method or update variant with a malformed payload (answered with -32602)."""


class VersionError(PeerError):
    """A protocol version that cannot be spoken on this connection."""


class TranslationError(LocalError):
    """A well-formed value that has no faithful rendering in the target protocol version.

    A request that needs the translation is refused with ``UNSUPPORTED`` (-32048)."""


class RpcFailure(Exception):
    """An operation failed and ``error`` is the JSON-RPC error object its caller is owed.

    The one base of the failures that travel up to a client as an answer: the agents layer
    raises ``AgentError`` and the sessions layer ``SessionFailure``, both subclasses; the server
    answers any of them with ``error`` verbatim, without a traceback (they are expected).
    """

    def __init__(self, error: RpcError) -> None:
        super().__init__(f"{error.message} ({error.code})")
        self.error = error

    @property
    def code(self) -> int:
        return self.error.code


@dataclass(frozen=True, slots=True)
class RpcError:
    """A JSON-RPC error object.

    ``to_dict()`` gives the wire form; ``data`` is omitted when it is ``None``.
    """

    code: int
    message: str
    data: Any = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out

    @classmethod
    def from_dict(cls, obj: Any) -> RpcError:
        """Build from a wire error object, tolerating a malformed one."""
        if isinstance(obj, dict):
            code = obj.get("code")
            message = obj.get("message")
            return cls(
                code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                message if isinstance(message, str) else "error",
                obj.get("data"),
            )
        return cls(INTERNAL_ERROR, "malformed error object", obj)


def parse_error(detail: str | None = None) -> RpcError:
    return RpcError(PARSE_ERROR, "Parse error", detail)


def invalid_request(detail: str | None = None) -> RpcError:
    return RpcError(INVALID_REQUEST, "Invalid request", detail)


def method_not_found(method: str) -> RpcError:
    return RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})


def invalid_params(detail: str | None = None) -> RpcError:
    return RpcError(INVALID_PARAMS, "Invalid params", detail)


def internal_error(detail: str | None = None) -> RpcError:
    return RpcError(INTERNAL_ERROR, "Internal error", detail)


def request_cancelled(detail: str | None = None) -> RpcError:
    return RpcError(REQUEST_CANCELLED, "Request cancelled", detail)


def auth_required(detail: str | None = None) -> RpcError:
    return RpcError(AUTH_REQUIRED, "Authentication required", detail)


def resource_not_found(detail: str | None = None) -> RpcError:
    return RpcError(RESOURCE_NOT_FOUND, "Resource not found", detail)


def hub_error(code: int, message: str, data: Any = None) -> RpcError:
    """One of acp-hub's own errors (codes -32040..-32059, see ``docs/protocol.md``)."""
    return RpcError(code, message, data)


def forbidden_scope(action: str, scope: str, needed: str) -> RpcError:
    """A refusal for the credential's scope, whatever its role: ``scope`` names what it lacks
    (``hub``: a credential for the whole hub; ``not_link``: it is a share link; ``agents``: its
    ``agents`` claim; ``expired``: it has expired), the message says what ``action`` needs."""
    return RpcError(
        FORBIDDEN, f"Forbidden: {action} needs {needed}", {"action": action, "scope": scope}
    )


def forbidden(needed: str, have: str, action: str) -> RpcError:
    """A role refusal; the message names the missing role."""
    return RpcError(
        FORBIDDEN,
        f"Forbidden: {action} needs role '{needed}', this connection has '{have}'",
        {"needed": needed, "role": have, "action": action},
    )
