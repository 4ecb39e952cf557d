"""What ``initialize`` says across versions: agent capabilities and auth methods.

v2 reorganised the capabilities and made support markers objects instead of booleans
(https://agentclientprotocol.com/protocol/v2/migration#initialization); auth methods name
their id ``methodId`` and carry a ``type``
(https://agentclientprotocol.com/protocol/v2/migration#authentication).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hub.protocol.shapes import (  # Structural: the shape checks used here, one by one.
    copy_meta,
    named_entries,
    rename,
    require_object,
    require_objects,
    require_str,
)

__all__ = [
    "auth_methods_v1_to_v2",
    "auth_methods_v2_to_v1",
    "capabilities_v1_to_v2",
    "capabilities_v2_to_v1",
]


def capabilities_v1_to_v2(capabilities: Mapping[str, Any] | None) -> dict[str, Any]:
    """A v1 agent's ``agentCapabilities`` as v2 ``capabilities``.

    Booleans become ``{}`` when true; stdio MCP is always there (mandatory in v1), SSE has
    no v2 form. ``list``/``resume``/``close`` are v2 baseline, which the hub serves itself
    where the agent lacks them, and ``auth.logout`` is implied by v2 auth methods.
    """
    caps = require_object(capabilities or {}, "agentCapabilities")
    prompt = require_object(caps.get("promptCapabilities") or {}, "promptCapabilities")
    mcp = require_object(caps.get("mcpCapabilities") or {}, "mcpCapabilities")
    sessions = require_object(caps.get("sessionCapabilities") or {}, "sessionCapabilities")
    session: dict[str, Any] = {
        "prompt": {
            key: {} for key in ("image", "audio", "embeddedContext") if prompt.get(key) is True
        },
        "mcp": {"stdio": {}, **({"http": {}} if mcp.get("http") is True else {})},
    }
    for key in ("delete", "additionalDirectories"):
        if sessions.get(key) is not None:
            session[key] = dict(require_object(sessions[key], f"sessionCapabilities.{key}"))
    return copy_meta(caps, {"session": session})


def capabilities_v2_to_v1(
    capabilities: Mapping[str, Any] | None, *, auth_methods: bool = False
) -> dict[str, Any]:
    """A v2 agent's ``capabilities`` as v1 ``agentCapabilities``.

    The hub replays sessions itself, so ``loadSession`` and ``list``/``resume``/``close``
    are always offered; ``auth.logout`` when the agent has auth methods.
    """
    caps = require_object(capabilities or {}, "capabilities")
    session = require_object(caps.get("session") or {}, "capabilities.session")
    prompt = require_object(session.get("prompt") or {}, "capabilities.session.prompt")
    mcp = require_object(session.get("mcp") or {}, "capabilities.session.mcp")
    sessions: dict[str, Any] = {"list": {}, "resume": {}, "close": {}}
    for key in ("delete", "additionalDirectories"):
        if session.get(key) is not None:
            sessions[key] = dict(require_object(session[key], f"capabilities.session.{key}"))
    out: dict[str, Any] = {
        "loadSession": True,
        "promptCapabilities": {
            key: prompt.get(key) is not None for key in ("image", "audio", "embeddedContext")
        },
        "mcpCapabilities": {"http": mcp.get("http") is not None, "sse": False},
        "sessionCapabilities": sessions,
    }
    if auth_methods:
        out["auth"] = {"logout": {}}
    return copy_meta(caps, out)


def auth_methods_v1_to_v2(methods: Sequence[Any] | None) -> list[dict[str, Any]]:
    """v1 ``authMethods`` as v2: ``id`` -> ``methodId``, no ``type`` means ``agent``,
    a terminal method's ``env`` map becomes a ``[{name, value}]`` list."""
    out = []
    for where, method in named_entries(methods, "authMethods", "id"):
        converted = rename(method, "id", "methodId")
        converted["type"] = method.get("type") or "agent"
        env = method.get("env")
        if converted["type"] == "terminal" and env is not None:
            env = require_object(env, f"{where}.env")
            converted["env"] = [{"name": k, "value": v} for k, v in env.items()]
        out.append(converted)
    return out


def auth_methods_v2_to_v1(methods: Sequence[Any] | None) -> list[dict[str, Any]]:
    """v2 ``authMethods`` as v1: ``methodId`` -> ``id``, ``type`` kept only for
    ``terminal`` (whose ``env`` list becomes a map); ``_x`` types have no v1 form and are
    dropped."""
    out = []
    for where, method in named_entries(methods, "authMethods", "methodId"):
        kind = require_str(method, "type", where)
        if kind not in ("agent", "terminal"):
            continue
        converted = rename(method, "methodId", "id")
        if kind == "agent":
            del converted["type"]
        elif method.get("env") is not None:
            env = require_objects(method, "env", where)
            converted["env"] = {
                require_str(var, "name", f"{where}.env"): require_str(var, "value", f"{where}.env")
                for var in env
            }
        out.append(converted)
    return out
