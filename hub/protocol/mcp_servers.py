"""MCP server entries of ``session/new``, ``session/load`` and ``session/resume`` across
versions (https://agentclientprotocol.com/protocol/v2/migration#mcp-server-configuration):
v1 stdio entries are untagged, v2 entries always carry a ``type``; v1's ``sse`` has no v2
form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hub.protocol.errors import TranslationError
from hub.protocol.shapes import fail, require_object, require_objects, require_str

__all__ = ["check_mcp_servers_v2", "mcp_servers_v1_to_v2", "mcp_servers_v2_to_v1"]


def _tagged(raw: Any, i: int) -> tuple[str, Mapping[str, Any], str]:
    """The ``i``-th v2 entry: where it stands (for errors), the entry and its ``type``;
    ``InvalidParams`` unless it is an object with a string ``type`` and ``name``."""
    where = f"mcpServers[{i}]"
    server = require_object(raw, where)
    kind = require_str(server, "type", where)
    require_str(server, "name", where)
    return where, server, kind


def mcp_servers_v2_to_v1(
    servers: Sequence[Any] | None, *, http: bool = True
) -> list[dict[str, Any]]:
    """v2 MCP server entries for a v1 ``session/new``/``load``/``resume``.

    stdio entries lose their ``type`` and get ``args``/``env`` defaults; http entries get
    ``headers: []``. An http entry for an agent without http support (``http=False``) and
    any other type raise ``TranslationError``.
    """
    out = []
    for i, raw in enumerate(servers or []):
        where, server, kind = _tagged(raw, i)
        if kind == "stdio":
            require_str(server, "command", where)
            entry = {k: v for k, v in server.items() if k != "type"}
            entry["args"] = server.get("args") or []
            entry["env"] = server.get("env") or []
        elif kind == "http" and http:
            require_str(server, "url", where)
            entry = dict(server)
            entry["headers"] = server.get("headers") or []
        else:
            raise TranslationError(f"{where}: the agent cannot take an MCP server of type '{kind}'")
        out.append(entry)
    return out


def mcp_servers_v1_to_v2(servers: Sequence[Any] | None) -> list[dict[str, Any]]:
    """v1 MCP server entries as v2: untagged entries are stdio; ``sse`` has no v2 form."""
    if servers is not None and not isinstance(servers, list | tuple):
        fail("mcpServers", "must be an array")
    out = []
    for i, raw in enumerate(servers or []):
        where = f"mcpServers[{i}]"
        server = require_object(raw, where)
        require_str(server, "name", where)
        kind = server.get("type")
        if kind is None:
            require_str(server, "command", where)
            out.append({"type": "stdio", **server})
        elif kind == "http":
            require_str(server, "url", where)
            out.append(dict(server))
        elif kind == "sse":
            raise TranslationError(f"{where}: SSE MCP servers do not exist in v2")
        else:
            fail(where, f"unknown MCP server type {kind!r}")
    return out


def check_mcp_servers_v2(servers: Any) -> list[dict[str, Any]]:
    """A v2 client's ``mcpServers``, checked: ``InvalidParams`` unless it is an array of
    ``stdio`` entries (``name``, ``command``, optional ``args`` strings and ``env`` name/value
    objects) and ``http`` entries (``name``, ``url``, optional ``headers`` name/value objects).
    The entries are returned as plain dicts, unchanged otherwise."""
    if servers is None:
        return []
    if not isinstance(servers, list):
        fail("mcpServers", "must be an array")
    out = []
    for i, raw in enumerate(servers):
        where, server, kind = _tagged(raw, i)
        if kind == "stdio":
            require_str(server, "command", where)
            if "args" in server:
                args = server["args"]
                if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                    fail(where, "'args' must be an array of strings")
            pairs = "env"
        elif kind == "http":
            require_str(server, "url", where)
            pairs = "headers"
        else:
            fail(where, f"unknown MCP server type {kind!r}")
        if pairs in server:
            for pair in require_objects(server, pairs, where):
                require_str(pair, "name", f"{where}.{pairs}")
                require_str(pair, "value", f"{where}.{pairs}")
        out.append(dict(server))
    return out
