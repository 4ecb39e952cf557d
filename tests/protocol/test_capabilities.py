"""Agent capabilities and auth methods across versions."""

from __future__ import annotations

import pytest

from hub.protocol.capabilities import (
    auth_methods_v1_to_v2,
    auth_methods_v2_to_v1,
    capabilities_v1_to_v2,
    capabilities_v2_to_v1,
)
from hub.protocol.errors import InvalidParams
from tests.protocol.translation import (
    Json,
    Schema,
)


def test_capabilities_v1_to_v2(v1: Schema, v2: Schema) -> None:
    caps = {
        "loadSession": True,
        "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": True},
        "sessionCapabilities": {
            "list": {},
            "resume": {},
            "delete": {},
            "additionalDirectories": {},
        },
        "auth": {"logout": {}},
        "_meta": {"x": 1},
    }
    v1.check("AgentCapabilities", caps)
    out = capabilities_v1_to_v2(caps)
    v2.check("AgentCapabilities", out)
    assert out == {
        "session": {
            "prompt": {"image": {}, "embeddedContext": {}},
            "mcp": {"stdio": {}, "http": {}},
            "delete": {},
            "additionalDirectories": {},
        },
        "_meta": {"x": 1},
    }
    assert capabilities_v1_to_v2(None) == {"session": {"prompt": {}, "mcp": {"stdio": {}}}}
    with pytest.raises(InvalidParams):
        capabilities_v1_to_v2({"promptCapabilities": True})


def test_capabilities_v2_to_v1(v1: Schema, v2: Schema) -> None:
    caps: Json = {
        "session": {"prompt": {"audio": {}}, "mcp": {"stdio": {}, "http": {}}, "delete": {}}
    }
    v2.check("AgentCapabilities", caps)
    out = capabilities_v2_to_v1(caps, auth_methods=True)
    v1.check("AgentCapabilities", out)
    assert out == {
        "loadSession": True,
        "promptCapabilities": {"image": False, "audio": True, "embeddedContext": False},
        "mcpCapabilities": {"http": True, "sse": False},
        "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        "auth": {"logout": {}},
    }
    bare = capabilities_v2_to_v1({})
    assert "auth" not in bare
    assert bare["mcpCapabilities"] == {"http": False, "sse": False}


def test_auth_methods_both_ways(v1: Schema, v2: Schema) -> None:
    v1_methods: list[Json] = [
        {"id": "oauth", "name": "Log in", "description": "Browser login"},
        {"id": "cli", "name": "Terminal", "type": "terminal", "args": ["login"], "env": {"A": "1"}},
    ]
    v2_methods = auth_methods_v1_to_v2(v1_methods)
    assert v2_methods == [
        {"methodId": "oauth", "name": "Log in", "description": "Browser login", "type": "agent"},
        {
            "methodId": "cli",
            "name": "Terminal",
            "type": "terminal",
            "args": ["login"],
            "env": [{"name": "A", "value": "1"}],
        },
    ]
    for method in v1_methods:
        v1.check("AuthMethod", method)
    for method in v2_methods:
        v2.check("AuthMethod", method)
    assert auth_methods_v2_to_v1(v2_methods) == v1_methods  # lossless both ways
    custom = {"methodId": "k", "name": "Key", "type": "_acme_key"}
    assert auth_methods_v2_to_v1([custom]) == []
    bare = {"methodId": "t", "name": "T", "type": "terminal"}
    assert auth_methods_v2_to_v1([bare]) == [{"id": "t", "name": "T", "type": "terminal"}]
    assert auth_methods_v1_to_v2(None) == []
    assert auth_methods_v2_to_v1(None) == []
    with pytest.raises(InvalidParams):
        auth_methods_v1_to_v2([{"name": "x"}])
    with pytest.raises(InvalidParams):
        auth_methods_v1_to_v2([{"id": "t", "name": "T", "type": "terminal", "env": ["A=1"]}])
    with pytest.raises(InvalidParams):
        auth_methods_v2_to_v1([{"methodId": "x", "name": "x"}])
    with pytest.raises(InvalidParams):
        auth_methods_v2_to_v1([{**bare, "env": [{"name": "A"}]}])
