"""Shared by the translation tests: the golden fixtures, the ACP schemas, small builders.

The golden files (``fixtures/translate``) hold whole v1 -> v2 and v2 -> v1 streams; the
schemas come from the pinned SDK package (``tests.support.acp_schema``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.variants import REMOVED_VARIANTS
from tests.support import acp_schema

FIXTURES = Path(__file__).parent / "fixtures" / "translate"
Json = dict[str, Any]


def load(name: str) -> list[Json]:
    """The cases of one golden file: ``{"name", "v1", "v2", "setup"?}``."""
    cases: list[Json] = json.loads((FIXTURES / name).read_text())
    return cases


AGENT_CASES = load("agent_v1_to_v2.json")
CLIENT_CASES = load("client_v2_to_v1.json")


def run_agent(case: Json) -> list[Json]:
    """The v2 updates a fresh translator makes of a golden case's v1 stream."""
    translator = AgentV1Translator(id_prefix="hub-t-")
    out = translator.session_setup(case["setup"]) if "setup" in case else []
    for update in case["v1"]:
        out += translator.update(update)
    return out


def run_client(case: Json) -> list[Json]:
    """The v1 updates a fresh renderer makes of a golden case's v2 stream."""
    renderer = ClientV1Renderer()
    return [out for update in case["v2"] for out in renderer.update(update)]


def render(*updates: Json) -> list[Json]:
    renderer = ClientV1Renderer()
    return [out for update in updates for out in renderer.update(update)]


def text(value: str) -> Json:
    return {"type": "text", "text": value}


class Schema:
    """One version's schema; ``errors(def, instance)`` lists validation failures."""

    def __init__(self, version: str) -> None:
        path = acp_schema(int(version.removeprefix("v")))
        self.version = version
        self.defs = json.loads(path.read_text())["$defs"]
        self._validators: dict[str, Draft202012Validator] = {}

    def errors(self, name: str, instance: Any) -> list[str]:
        if name not in self._validators:
            self._validators[name] = Draft202012Validator(
                {"$defs": self.defs, "$ref": f"#/$defs/{name}"}
            )
        return [e.message for e in self._validators[name].iter_errors(instance)]

    def check(self, name: str, instance: Any) -> None:
        errors = self.errors(name, instance)
        assert errors == [], f"not a valid {self.version} {name}: {instance!r}: {errors}"


@cache
def schema(version: str) -> Schema:
    return Schema(version)


def check_v2_update(v2: Schema, update: Json) -> None:
    v2.check("SessionUpdate", update)
    # The v2 schema's `other` branch admits the removed v1 names; they must never appear.
    assert update["sessionUpdate"] not in REMOVED_VARIANTS


def is_extension(update: Json) -> bool:
    name: str = update["sessionUpdate"]
    return name.startswith("_") or name == "future_thing"


V2_OPTIONS: list[Json] = [
    {
        "configId": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": "ask",
        "options": [
            {
                "groupId": "safe",
                "name": "Safe",
                "options": [{"value": "ask", "name": "Ask", "description": "d"}],
            },
            {"groupId": "fast", "name": "Fast", "options": [{"value": "yolo", "name": "Yolo"}]},
        ],
    },
    {"configId": "web", "name": "Web", "type": "boolean", "currentValue": False},
]
