"""The bridge's frames: the hub's ``_meta["acp-hub"]`` read and written, answers carried
between the editor and the hub, the ``initialize`` the bridge sends the hub for the editor's,
and the bridge's own ``-32050`` error (the hub cannot be reached, or was lost).

Pure functions over JSON values, for the core (``hub.bridge.core``) and its I/O.
"""

from __future__ import annotations

from typing import Any

from hub.protocol import jsonrpc
from hub.protocol.errors import RpcError

__all__ = [
    "HUB_UNREACHABLE",
    "HubError",
    "answer_frame",
    "hub_initialize_params",
    "hub_meta",
    "payload",
    "unreachable",
    "with_hub_meta",
]

HUB_UNREACHABLE = -32050
"""The bridge's own error code: the hub cannot be reached, or its connection was lost."""


def unreachable(message: str, url: str, **data: Any) -> RpcError:
    """A ``-32050`` error naming the hub's URL."""
    return RpcError(HUB_UNREACHABLE, message, {"url": url, **data})


def hub_meta(obj: Any) -> dict[str, Any]:
    """``obj['_meta']['acp-hub']`` when it is an object, else ``{}``."""
    meta = obj.get("_meta") if isinstance(obj, dict) else None
    hub = meta.get("acp-hub") if isinstance(meta, dict) else None
    return hub if isinstance(hub, dict) else {}


class HubError(Exception):
    """The hub answered one of the bridge's own requests with an error."""

    def __init__(self, error: RpcError) -> None:
        super().__init__(error.message)
        self.error = error


def payload(entry: jsonrpc.Response | jsonrpc.ErrorResponse) -> dict[str, Any]:
    """The answer without its id: ``{"result": ...}`` or ``{"error": ...}``."""
    if isinstance(entry, jsonrpc.Response):
        return {"result": entry.result}
    return {"error": entry.error.to_dict()}


def answer_frame(request_id: Any, payload: dict[str, Any]) -> bytes:
    """The JSON-RPC answer to ``request_id`` that carries ``payload`` (see ``payload``)."""
    if "error" in payload:
        return jsonrpc.error(request_id, RpcError.from_dict(payload["error"]))
    return jsonrpc.response(request_id, payload.get("result"))


def with_hub_meta(params: dict[str, Any], *, keep: bool = False, **values: Any) -> dict[str, Any]:
    """``params`` with ``values`` under ``_meta["acp-hub"]`` (``keep``: the editor's own
    values win)."""
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    hub = hub_meta(params)
    meta["acp-hub"] = {**values, **hub} if keep else {**hub, **values}
    return {**params, "_meta": meta}


def hub_initialize_params(version: int, params: dict[str, Any]) -> dict[str, Any]:
    """The hub's ``initialize``: the editor's, in its version, with the editor's client
    capabilities less ``fs`` and ``terminal`` (the hub never relays those requests), and, on
    v1, the hub's events asked for (contiguous seqs, turn ends for the cursor logic)."""
    out: dict[str, Any] = {"protocolVersion": version}
    caps_key, info_key = (
        ("capabilities", "info") if version >= 2 else ("clientCapabilities", "clientInfo")
    )
    caps = params.get(caps_key)
    caps = (
        {k: v for k, v in caps.items() if k not in ("fs", "terminal")}
        if isinstance(caps, dict)
        else {}
    )
    out[caps_key] = caps
    info = params.get(info_key)
    if not isinstance(info, dict):
        info = params.get("clientInfo") or params.get("info")
    if isinstance(info, dict):
        out[info_key] = info
    hub = dict(hub_meta(params))
    if version < 2:
        hub["events"] = True
    hub.pop("batches", None)  # the bridge relays one message per line
    out["_meta"] = {"acp-hub": hub}
    return out
