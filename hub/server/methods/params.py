"""The shapes of params that several method domains read: the hub's ``_meta`` key, a checked
value, a required string."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hub.protocol.errors import InvalidParams, invalid_params
from hub.sessions.errors import SessionFailure

__all__ = ["check_param", "hub_meta_of", "string"]


def hub_meta_of(params: dict[str, Any]) -> dict[str, Any]:
    meta = params.get("_meta")
    hub_meta = meta.get("acp-hub") if isinstance(meta, dict) else None
    return hub_meta if isinstance(hub_meta, dict) else {}


def check_param(parse: Callable[[Any], Any], value: Any) -> Any:
    try:
        return parse(value)
    except InvalidParams as exc:
        raise SessionFailure(invalid_params(str(exc))) from None


def string(params: dict[str, Any], key: str, message: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise SessionFailure(invalid_params(message))
    return value
