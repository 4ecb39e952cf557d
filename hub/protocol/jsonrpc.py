"""JSON-RPC 2.0 envelopes: parse once, classify, encode.

Theory of operation
-------------------
``parse`` decodes one frame (a stdio line or a WebSocket text message) with orjson and
classifies it into exactly one of:

* ``Request`` / ``Notification`` / ``Response`` / ``ErrorResponse`` - a well-formed message;
* ``Invalid`` - something to be answered with an error instead of being processed:
  ``-32700`` with ``id: null`` for bytes that are not JSON, ``-32600`` for JSON that is not
  a JSON-RPC message (with the entry's id when it had a valid one, else ``null``);
* ``Batch`` - a non-empty JSON array, only when ``allow_batch`` is set (ACP v2 connections,
  https://agentclientprotocol.com/protocol/v2/transports#json-rpc-batch-messages); each entry
  is classified on its own, so one bad entry does not spoil the rest.

Only the envelope is checked here; ``params`` and ``result`` are passed through untouched
(payload validation belongs to the method's handler). Unknown extra members are tolerated.
``params: null`` is read as absent, as many peers send it.

Two limits bound what one frame can make the hub hold or build (``docs/limits.md``):

* ``max_depth`` (default ``DEFAULT_MAX_DEPTH``, 64): how deeply objects and arrays may nest in
  one message, the message object being level 1 (in a batch, each entry is its own level 1).
  orjson reads 1,024 levels but writes only 254, and the hub re-encodes what it receives
  inside frames of its own, a few levels deeper; a message nested deeper is ``Invalid``:
  ``-32602`` with its id when the nesting is in a call's ``params``, else ``-32600``; a
  response nested deeper reads as an ``ErrorResponse`` (``-32600``) to the request it
  answers, so that the request fails instead of waiting for ever. The check costs two byte
  counts per frame: a value nested ``n`` levels deep needs ``n`` opening brackets, so only a
  frame with more brackets than the limit is walked (breadth first, no recursion, stopping
  at the limit).
* ``max_batch`` (default ``DEFAULT_MAX_BATCH``, 32): the entries of one batch. A larger batch
  is ``Invalid`` as a whole (``-32600``, ``id: null``), like an empty one: each entry can
  make the hub build an answer, so the bound caps what one frame can ask for.

Encoding always emits ``"jsonrpc": "2.0"``; ``params`` is omitted when ``None``; an
``Invalid`` is encoded as the error response that answers it. A batch reply that would be
empty (only notifications) is ``None``: an empty array is never sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson

from hub.protocol.errors import RpcError, invalid_params, invalid_request, parse_error

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_DEPTH",
    "Batch",
    "Entry",
    "ErrorResponse",
    "Invalid",
    "Message",
    "Notification",
    "Params",
    "Request",
    "RequestId",
    "Response",
    "batch_reply",
    "classify",
    "depth_exceeds",
    "encode",
    "encode_batch",
    "error",
    "is_request_id",
    "needs_reply",
    "notification",
    "parse",
    "request",
    "response",
]

DEFAULT_MAX_DEPTH: Final = 64
"""How deeply a message may nest objects and arrays (the message object is level 1)."""

DEFAULT_MAX_BATCH: Final = 32
"""How many entries one batch may hold."""

RequestId: TypeAlias = str | int | None
"""A JSON-RPC id as ACP allows it: a string, an integer or null (never a bool or float)."""

Params: TypeAlias = dict[str, Any] | list[Any] | None


@dataclass(frozen=True, slots=True)
class Request:
    """A call that expects a ``Response`` or ``ErrorResponse`` with the same ``id``."""

    id: RequestId
    method: str
    params: Params = None


@dataclass(frozen=True, slots=True)
class Notification:
    """A call without an id; it is never answered."""

    method: str
    params: Params = None


@dataclass(frozen=True, slots=True)
class Response:
    """A successful answer to the request ``id``."""

    id: RequestId
    result: Any


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """A failed answer to the request ``id`` (``None`` when the peer could not tell)."""

    id: RequestId
    error: RpcError


@dataclass(frozen=True, slots=True)
class Invalid:
    """Input that must be answered with ``error`` instead of being processed.

    ``id`` is the offending entry's id when it had a valid one, else ``None``. ``answers``
    is true when the entry has no method and a non-null id: a broken answer to the request
    ``id`` of the side that reads it, which that side should end as failed rather than leave
    waiting.
    """

    id: RequestId
    error: RpcError
    answers: bool = False


Message: TypeAlias = Request | Notification | Response | ErrorResponse
Entry: TypeAlias = Message | Invalid


@dataclass(frozen=True, slots=True)
class Batch:
    """A non-empty JSON-RPC batch (ACP v2 only); entries in the order received."""

    entries: tuple[Entry, ...]


def is_request_id(value: object) -> bool:
    """True for a valid JSON-RPC id: ``str``, ``int`` (not ``bool``) or ``None``."""
    return value is None or isinstance(value, str) or _is_int(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- parsing ---------------------------------------------------------------------------


def parse(
    data: bytes | str,
    *,
    allow_batch: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_batch: int = DEFAULT_MAX_BATCH,
) -> Entry | Batch:
    """Decode and classify one frame. Never raises on any input.

    Without ``allow_batch`` a JSON array is ``Invalid`` (-32600): batches exist only on
    protocol v2 connections. An empty array, or one of more than ``max_batch`` entries, is
    always ``Invalid`` (-32600, ``id: null``). A message nested more than ``max_depth``
    levels deep is ``Invalid`` (see the module docstring).
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return Invalid(None, parse_error(str(exc)))
    # Nesting n levels deep takes n opening brackets: most frames have too few to be walked.
    walk = (
        len(data) > max_depth
        and (
            data.count(b"{") + data.count(b"[")
            if isinstance(data, bytes)
            else data.count("{") + data.count("[")
        )
        > max_depth
    )
    if isinstance(obj, list):
        if not allow_batch:
            return Invalid(
                None, invalid_request("batches are only allowed on protocol v2 connections")
            )
        if not obj:
            return Invalid(None, invalid_request("empty batch"))
        if len(obj) > max_batch:
            return Invalid(
                None,
                invalid_request(f"a batch holds at most {max_batch} entries, not {len(obj)}"),
            )
        if walk:
            return Batch(tuple(_classify_bounded(item, max_depth) for item in obj))
        return Batch(tuple(classify(item) for item in obj))
    if walk:
        return _classify_bounded(obj, max_depth)
    return classify(obj)


def depth_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` nests objects and arrays more than ``limit`` levels deep (a
    container is level 1, a scalar level 0). Breadth first, without recursion, and it stops
    at level ``limit + 1``."""
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        level = [
            child
            for container in level
            for child in (container.values() if type(container) is dict else container)
            if type(child) is dict or type(child) is list
        ]
    return False


def _classify_bounded(obj: Any, max_depth: int) -> Entry:
    """``classify(obj)``, unless ``obj`` nests more than ``max_depth`` levels: then ``Invalid``
    (an ``ErrorResponse`` for an answer with an id)."""
    if not depth_exceeds(obj, max_depth):
        return classify(obj)
    msg_id = obj.get("id") if type(obj) is dict else None
    msg_id = msg_id if is_request_id(msg_id) else None
    detail = f"nested more than {max_depth} levels deep"
    if type(obj) is dict and "method" in obj:
        if depth_exceeds(obj.get("params"), max_depth - 1):
            return Invalid(msg_id, invalid_params(f"params {detail}"))
    elif msg_id is not None and type(obj) is dict and ("result" in obj or "error" in obj):
        # An answer that cannot be taken still ends the request it answers, as an error:
        # the caller is told instead of waiting for an answer that will not come.
        return ErrorResponse(msg_id, invalid_request(f"response {detail}"))
    return Invalid(msg_id, invalid_request(f"message {detail}"))


def classify(obj: Any) -> Entry:
    """Classify one decoded JSON value as a message, or ``Invalid`` with the reason."""
    if type(obj) is dict and "id" not in obj:
        # The common case first (an agent streams notifications): the same checks as below.
        method = obj.get("method")
        if (
            type(method) is str
            and obj.get("jsonrpc") == "2.0"
            and "result" not in obj
            and "error" not in obj
        ):
            params = obj.get("params")
            if params is None or type(params) is dict or type(params) is list:
                return Notification(method, params)
    if not isinstance(obj, dict):
        return Invalid(None, invalid_request("a JSON-RPC message must be an object"))
    has_id = "id" in obj
    msg_id = obj.get("id")
    if has_id and not is_request_id(msg_id):
        return Invalid(None, invalid_request("id must be a string, an integer or null"))
    answers = msg_id is not None and "method" not in obj
    if obj.get("jsonrpc") != "2.0":
        return Invalid(msg_id, invalid_request('jsonrpc must be "2.0"'), answers)

    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str):
            return Invalid(msg_id, invalid_request("method must be a string"))
        if "result" in obj or "error" in obj:
            return Invalid(msg_id, invalid_request("a call must not carry result or error"))
        params = obj.get("params")
        if params is not None and not isinstance(params, dict | list):
            return Invalid(msg_id, invalid_request("params must be an object or an array"))
        if has_id:
            return Request(msg_id, method, params)
        return Notification(method, params)

    has_result = "result" in obj
    has_error = "error" in obj
    if has_result == has_error:
        return Invalid(
            msg_id,
            invalid_request("a message needs a method, or exactly one of result and error"),
            answers,
        )
    if not has_id:
        return Invalid(None, invalid_request("a response must carry an id"))
    if has_error:
        return ErrorResponse(msg_id, RpcError.from_dict(obj["error"]))
    if msg_id is None:
        return Invalid(None, invalid_request("a result response must not have a null id"))
    return Response(msg_id, obj["result"])


def needs_reply(entry: Entry) -> bool:
    """True if the receiver owes an answer: requests and ``Invalid`` entries."""
    return isinstance(entry, Request | Invalid)


# -- encoding --------------------------------------------------------------------------


def _to_dict(entry: Entry) -> dict[str, Any]:
    if isinstance(entry, Request):
        out: dict[str, Any] = {"jsonrpc": "2.0", "id": entry.id, "method": entry.method}
        if entry.params is not None:
            out["params"] = entry.params
        return out
    if isinstance(entry, Notification):
        out = {"jsonrpc": "2.0", "method": entry.method}
        if entry.params is not None:
            out["params"] = entry.params
        return out
    if isinstance(entry, Response):
        return {"jsonrpc": "2.0", "id": entry.id, "result": entry.result}
    return {"jsonrpc": "2.0", "id": entry.id, "error": entry.error.to_dict()}


def encode(entry: Entry | Batch) -> bytes:
    """Serialize one entry (or a batch) to JSON bytes without a trailing newline."""
    if isinstance(entry, Batch):
        return encode_batch(entry.entries)
    return orjson.dumps(_to_dict(entry))


def encode_batch(entries: Iterable[Entry]) -> bytes:
    """Serialize entries as one JSON array. Raises ``ValueError`` if there are none."""
    items = [_to_dict(e) for e in entries]
    if not items:
        raise ValueError("an empty batch must never be sent")
    return orjson.dumps(items)


def request(id: RequestId, method: str, params: Params = None) -> bytes:
    """Encode a request."""
    return orjson.dumps(_to_dict(Request(id, method, params)))


def notification(method: str, params: Params = None) -> bytes:
    """Encode a notification."""
    return orjson.dumps(_to_dict(Notification(method, params)))


def response(id: RequestId, result: Any) -> bytes:
    """Encode a successful response (an exact-size copy: see ``exact``)."""
    return exact(orjson.dumps({"jsonrpc": "2.0", "id": id, "result": result}))


def error(id: RequestId, err: RpcError) -> bytes:
    """Encode an error response (an exact-size copy: see ``exact``)."""
    return exact(orjson.dumps({"jsonrpc": "2.0", "id": id, "error": err.to_dict()}))


def exact(encoded: bytes) -> bytes:
    """``encoded`` copied into an object of its own size.

    orjson's result keeps the allocation of its output buffer (about 4 KiB however short the
    JSON). Frames that may outlive the moment, such as the ones kept in a session's log or
    held by a connection until the transport takes them, are copied (about 0.6 us each)."""
    return bytes(memoryview(encoded))


def batch_reply(replies: Sequence[Response | ErrorResponse | Invalid]) -> bytes | None:
    """Encode the answers to a batch, or ``None`` if there are none (never send ``[]``)."""
    if not replies:
        return None
    return encode_batch(replies)
