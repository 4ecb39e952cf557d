"""v1 <-> v2 translation: golden wire messages, schema validity, round trips and losses."""

from __future__ import annotations

import base64
import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from hub.protocol.errors import InvalidParams, RpcError, TranslationError, internal_error
from hub.protocol.translate import (
    PERMISSION_TITLE,
    TOOL_TITLE,
    AgentV1Translator,
    ClientV1Renderer,
    auth_methods_v1_to_v2,
    auth_methods_v2_to_v1,
    capabilities_v1_to_v2,
    capabilities_v2_to_v1,
    config_options_v1_to_v2,
    config_options_v2_to_v1,
    git_patch,
    mcp_servers_v1_to_v2,
    mcp_servers_v2_to_v1,
    modes_from_config_options,
    permission_outcome_for_agent,
    permission_request_v1_to_v2,
    permission_request_v2_to_v1,
    prompt_v2_to_v1,
    sanitize_terminal,
    set_config_option_v1_to_v2,
    set_mode_v1_to_v2,
    stop_reason_for_v1,
)
from tests.support import require_shared

FIXTURES = Path(__file__).parent / "fixtures" / "translate"
Json = dict[str, Any]


def load(name: str) -> list[Json]:
    cases: list[Json] = json.loads((FIXTURES / name).read_text())
    return cases


AGENT_CASES = load("agent_v1_to_v2.json")
CLIENT_CASES = load("client_v2_to_v1.json")
REMOVED_IN_V2 = {"tool_call", "plan", "current_mode_update"}


def run_agent(case: Json) -> list[Json]:
    translator = AgentV1Translator(id_prefix="hub-t-")
    out = translator.session_setup(case["setup"]) if "setup" in case else []
    for update in case["v1"]:
        out += translator.update(update)
    return out


def run_client(case: Json) -> list[Json]:
    renderer = ClientV1Renderer()
    return [out for update in case["v2"] for out in renderer.update(update)]


def render(*updates: Json) -> list[Json]:
    renderer = ClientV1Renderer()
    return [out for update in updates for out in renderer.update(update)]


def text(value: str) -> Json:
    return {"type": "text", "text": value}


# ---------------------------------------------------------------------------------------
# Schemas


class Schema:
    """One version's schema; ``errors(def, instance)`` lists validation failures."""

    def __init__(self, version: str) -> None:
        path = require_shared("acp-spec", "schema", version, "schema.json")
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
        assert errors == [], f"not a valid {self.version} {name}: {instance!r}"


@cache
def _schema(version: str) -> Schema:
    return Schema(version)


@pytest.fixture
def v1() -> Schema:
    return _schema("v1")


@pytest.fixture
def v2() -> Schema:
    return _schema("v2")


def check_v2_update(v2: Schema, update: Json) -> None:
    v2.check("SessionUpdate", update)
    # The v2 schema's `other` branch admits the removed v1 names; they must never appear.
    assert update["sessionUpdate"] not in REMOVED_IN_V2


def is_extension(update: Json) -> bool:
    name: str = update["sessionUpdate"]
    return name.startswith("_") or name == "future_thing"


# ---------------------------------------------------------------------------------------
# Golden files


@pytest.mark.parametrize("case", AGENT_CASES, ids=[c["name"] for c in AGENT_CASES])
def test_agent_v1_to_v2_golden(case: Json) -> None:
    assert run_agent(case) == case["v2"]


@pytest.mark.parametrize("case", CLIENT_CASES, ids=[c["name"] for c in CLIENT_CASES])
def test_client_v2_to_v1_golden(case: Json) -> None:
    assert run_client(case) == case["v1"]


@pytest.mark.parametrize("case", AGENT_CASES, ids=[c["name"] for c in AGENT_CASES])
def test_agent_golden_messages_are_schema_valid(case: Json, v1: Schema, v2: Schema) -> None:
    for update in case["v1"]:
        if not is_extension(update):
            v1.check("SessionUpdate", update)
    for update in run_agent(case):
        if not is_extension(update):
            check_v2_update(v2, update)
        else:
            v2.check("SessionUpdate", update)


@pytest.mark.parametrize("case", CLIENT_CASES, ids=[c["name"] for c in CLIENT_CASES])
def test_client_golden_messages_are_schema_valid(case: Json, v1: Schema, v2: Schema) -> None:
    for update in case["v2"]:
        if not update["sessionUpdate"].startswith("_hub_"):
            v2.check("SessionUpdate", update)
    for update in run_client(case):
        if update["sessionUpdate"].startswith("_hub_"):
            continue  # the hub's own variants, sent only to v1 clients that opted in
        v1.check("SessionUpdate", update)


def test_goldens_cover_every_variant_of_both_unions(v1: Schema, v2: Schema) -> None:
    def names(schema: Schema) -> set[str]:
        union = schema.defs["SessionUpdate"]
        branches = union.get("oneOf") or union.get("anyOf")
        return {
            b["properties"]["sessionUpdate"]["const"]
            for b in branches
            if "const" in b["properties"]["sessionUpdate"]
        }

    v1_seen = {u["sessionUpdate"] for c in AGENT_CASES for u in c["v1"]}
    v2_seen = {u["sessionUpdate"] for c in CLIENT_CASES for u in c["v2"]}
    assert len(names(v1)) == 11
    assert len(names(v2)) == 16
    assert names(v1) <= v1_seen
    assert names(v2) <= v2_seen
    assert names(v1) <= {u["sessionUpdate"] for c in CLIENT_CASES for u in c["v1"]} | {"plan"}


def test_the_schema_check_itself_rejects_what_it_should(v1: Schema, v2: Schema) -> None:
    assert v1.errors("SessionUpdate", {"sessionUpdate": "tool_call", "toolCallId": "x"})
    assert v1.errors("SessionUpdate", {"sessionUpdate": "_hub_presence", "clients": []})
    assert v1.errors(
        "SessionUpdate",
        {"sessionUpdate": "tool_call_update", "toolCallId": "x", "status": "cancelled"},
    )
    assert v2.errors("SessionUpdate", {"sessionUpdate": "agent_message_chunk", "content": text("")})
    with pytest.raises(AssertionError):
        check_v2_update(v2, {"sessionUpdate": "plan", "entries": []})


# ---------------------------------------------------------------------------------------
# Round trips


LOSSLESS_V1: list[list[Json]] = [
    [{"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": text("hi")}],
    [{"sessionUpdate": "user_message_chunk", "messageId": "u", "content": text("q")}],
    [{"sessionUpdate": "agent_thought_chunk", "messageId": "t", "content": text("...")}],
    [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "Write",
            "kind": "edit",
            "status": "pending",
            "content": [
                {"type": "content", "content": text("x")},
                {"type": "diff", "path": "/p/new.py", "newText": "print(1)\n"},
            ],
            "locations": [{"path": "/p/new.py"}],
            "rawInput": {"a": 1},
            "_meta": {"m": 1},
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "status": "completed",
            "title": "Wrote",
            "kind": "edit",
            "content": [{"type": "content", "content": text("done")}],
            "locations": [],
            "rawOutput": {"ok": True},
        },
    ],
    [
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "a", "priority": "high", "status": "in_progress"}],
        }
    ],
    [
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"name": "web", "description": "d", "input": {"hint": "q"}},
                {"name": "x", "description": "y"},
            ],
        }
    ],
    [
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {
                    "id": "model",
                    "name": "Model",
                    "type": "select",
                    "currentValue": "a",
                    "options": [
                        {"group": "g", "name": "G", "options": [{"value": "a", "name": "A"}]}
                    ],
                },
                {"id": "b", "name": "B", "type": "boolean", "currentValue": True},
            ],
        }
    ],
    [{"sessionUpdate": "session_info_update", "title": "t", "updatedAt": "2026-01-01T00:00:00Z"}],
    [
        {
            "sessionUpdate": "usage_update",
            "used": 1,
            "size": 2,
            "cost": {"amount": 1, "currency": "EUR"},
        }
    ],
]


@pytest.mark.parametrize("updates", LOSSLESS_V1, ids=[u[0]["sessionUpdate"] for u in LOSSLESS_V1])
def test_v1_agent_to_v1_client_round_trip_is_lossless(updates: list[Json]) -> None:
    translator = AgentV1Translator()
    renderer = ClientV1Renderer()
    out = [
        v1 for update in updates for v2 in translator.update(update) for v1 in renderer.update(v2)
    ]
    assert out == updates


def test_v1_tool_call_defaults_come_back_spelled_out() -> None:
    """Lossless in meaning: the v1 defaults of an omitted kind/status/content are explicit."""
    translator = AgentV1Translator()
    update = {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "T"}
    (v2,) = translator.update(update)
    assert render(v2) == [
        {**update, "kind": "other", "status": "pending", "content": [], "locations": []}
    ]


def test_lossy_chunk_without_id_comes_back_with_a_hub_id() -> None:
    translator = AgentV1Translator(id_prefix="hub-x-")
    update = {"sessionUpdate": "agent_message_chunk", "content": text("hi")}
    (v2,) = translator.update(update)
    assert render(v2) == [{**update, "messageId": "hub-x-1"}]


def test_lossy_modify_diff_comes_back_as_patch_text() -> None:
    translator = AgentV1Translator()
    diff = {"type": "diff", "path": "/p/a", "oldText": "1\n2\n", "newText": "1\n3\n"}
    (v2,) = translator.update(
        {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "T", "content": [diff]}
    )
    (v1_item,) = render(v2)[0]["content"]
    assert v1_item["type"] == "content"
    assert (
        v1_item["content"]["text"]
        == "diff --git /p/a /p/a\n--- /p/a\n+++ /p/a\n@@ -1,2 +1,2 @@\n 1\n-2\n+3\n"
    )
    assert v1_item != diff


def test_lossy_null_scalars_are_omitted_and_collections_emptied() -> None:
    out = render(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "title": "T",
            "rawInput": {"a": 1},
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": None, "rawInput": None},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": None},
    )
    # a v1 client keeps title "T" and the raw input: v1 cannot clear them
    assert out[1] == {"sessionUpdate": "tool_call_update", "toolCallId": "c"}
    assert out[2] == {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": []}


def test_lossy_several_plans_collapse_into_the_one_v1_plan() -> None:
    entry = {"content": "a", "priority": "low", "status": "pending"}
    out = render(
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "p1", "entries": [entry]},
        },
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p2", "entries": []}},
    )
    assert out == [
        {"sessionUpdate": "plan", "entries": [entry]},
        {"sessionUpdate": "plan", "entries": []},
    ]


def test_lossy_message_replacement_is_marked_not_dropped() -> None:
    out = render(
        {"sessionUpdate": "agent_message", "messageId": "m", "content": [text("a")]},
        {"sessionUpdate": "agent_message", "messageId": "m", "content": [text("b")]},
    )
    assert out[1]["_meta"] == {"acp-hub": {"replaces": "m"}}
    assert out[1]["content"] == text("b")


@given(st.text(alphabet=st.sampled_from("ab \n\r\t\\+-@é😀\x0b\x1c"), max_size=60))
def test_v1_added_file_round_trips_through_the_git_patch(new_text: str) -> None:
    translator = AgentV1Translator()
    diff = {"type": "diff", "path": "/p/f", "newText": new_text}
    (v2,) = translator.update(
        {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "T", "content": [diff]}
    )
    assert render(v2)[0]["content"] == [diff]


def apply_patch(old: str, patch: str) -> str:
    """A minimal unified-diff applier, enough to check the patches the hub generates."""
    src = re.findall(r"[^\n]*\n|[^\n]+\Z", old)
    rows = patch.split("\n")[:-1]
    out: list[str] = []
    pos = 0
    i = 0
    while i < len(rows):
        hunk = re.match(r"@@ -(\d+)(?:,(\d+))? ", rows[i])
        i += 1
        if hunk is None:
            continue
        start = int(hunk.group(1)) - (0 if hunk.group(2) == "0" else 1)
        out += src[pos:start]
        pos = start
        last = ""
        while i < len(rows) and rows[i][:1] in (" ", "-", "+", "\\"):
            tag, body = rows[i][:1], rows[i][1:] + "\n"
            if tag == "\\":
                if last in (" ", "+"):
                    out[-1] = out[-1][:-1]  # "\ No newline at end of file"
            elif tag == "+":
                out.append(body)
            else:
                assert src[pos].rstrip("\n") == body[:-1]
                pos += 1
                if tag == " ":
                    out.append(body)
            last = tag
            i += 1
    return "".join(out + src[pos:])


@given(
    st.text(alphabet=st.sampled_from("ab\n"), max_size=40),
    st.text(alphabet=st.sampled_from("ab\n"), max_size=40),
)
def test_generated_patches_turn_the_old_text_into_the_new(old: str, new: str) -> None:
    patch = git_patch("/p/f", old, new)
    assert patch.startswith("diff --git /p/f /p/f\n")
    assert apply_patch(old, patch) == new


def test_git_patch_of_an_empty_new_file_has_no_hunk() -> None:
    assert git_patch("/p/e", None, "") == "diff --git /p/e /p/e\nnew file mode 100644\n"
    out = render(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [
                {
                    "type": "diff",
                    "changes": [{"operation": "add", "path": "/p/e"}],
                    "patch": {"format": "git_patch", "text": git_patch("/p/e", None, "")},
                }
            ],
        }
    )
    assert out[0]["content"] == [{"type": "diff", "path": "/p/e", "newText": ""}]


@pytest.mark.parametrize(
    "patch",
    [
        "diff --git /p/b /p/b\nnew file mode 100644\nBinary files /dev/null and /p/b differ\n",
        "diff --git /p/b /p/b\n@@ -1 +1 @@\n-x\n+y\n",
        "diff --git /p/b /p/b\n@@ -0,0 +1 @@\n+x\ndiff --git /p/c /p/c\n@@ -0,0 +1 @@\n+y\n",
    ],
    ids=["binary", "not-pure-add", "two-sections"],
)
def test_add_diffs_that_cannot_be_rebuilt_stay_patch_text(patch: str) -> None:
    item = {
        "type": "diff",
        "changes": [{"operation": "add", "path": "/p/b"}],
        "patch": {"format": "git_patch", "text": patch},
    }
    (v1_item,) = render(
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]}
    )[0]["content"]
    assert v1_item["content"] == text(patch)


def test_add_diff_of_a_binary_file_or_other_format_stays_text() -> None:
    for change, fmt in (({"fileType": "binary"}, "git_patch"), ({}, "_acme_patch")):
        item = {
            "type": "diff",
            "changes": [{"operation": "add", "path": "/p/b", **change}],
            "patch": {"format": fmt, "text": "+x"},
        }
        out = render({"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]})
        assert out[0]["content"][0]["type"] == "content"


# ---------------------------------------------------------------------------------------
# Pass-through of extensions and _meta


def test_meta_survives_at_every_level_v1_to_v2() -> None:
    meta = {"vendor": {"deep": [1, {"x": None}]}}
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": "c",
        "title": "T",
        "content": [{"type": "content", "content": {**text("a"), "_meta": meta}, "_meta": meta}],
        "locations": [{"path": "/p", "_meta": meta}],
        "_meta": meta,
    }
    original = copy.deepcopy(update)
    (out,) = AgentV1Translator().update(update)
    assert out["_meta"] == meta
    assert out["content"][0] == {
        "type": "content",
        "content": {**text("a"), "_meta": meta},
        "_meta": meta,
    }
    assert out["locations"][0]["_meta"] == meta
    assert update == original  # the input is never modified


def test_meta_survives_v2_to_v1_and_input_is_untouched() -> None:
    meta = {"vendor": 1}
    update = {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [
            {
                "name": "a",
                "description": "b",
                "input": {"type": "text", "hint": "h", "_meta": meta},
                "_meta": meta,
            }
        ],
        "_meta": meta,
    }
    original = copy.deepcopy(update)
    (out,) = render(update)
    assert out["_meta"] == meta
    assert out["availableCommands"][0] == {
        "name": "a",
        "description": "b",
        "input": {"hint": "h", "_meta": meta},
        "_meta": meta,
    }
    assert update == original


def test_hub_variants_pass_the_renderer_unchanged_and_others_are_dropped() -> None:
    hub = {
        "sessionUpdate": "_hub_permission",
        "permissionId": "p",
        "status": "pending",
        "_meta": {"a": 1},
    }
    assert render(hub) == [hub]
    assert render({"sessionUpdate": "_hubble", "x": 1}) == []
    assert render({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "v1 name"}) == []


# ---------------------------------------------------------------------------------------
# Malformed known payloads


BAD_V1 = [
    ("not an object", ["x"]),
    ("no variant", {"content": text("a")}),
    ("variant not a string", {"sessionUpdate": 3}),
    ("chunk without content", {"sessionUpdate": "agent_message_chunk"}),
    ("chunk content not a block", {"sessionUpdate": "agent_message_chunk", "content": "hi"}),
    ("chunk block without type", {"sessionUpdate": "user_message_chunk", "content": {"text": "a"}}),
    (
        "chunk id not a string",
        {"sessionUpdate": "agent_thought_chunk", "messageId": 7, "content": text("a")},
    ),
    ("tool_call without title", {"sessionUpdate": "tool_call", "toolCallId": "c"}),
    ("tool_call without id", {"sessionUpdate": "tool_call", "title": "T"}),
    ("tool_call_update without id", {"sessionUpdate": "tool_call_update", "status": "failed"}),
    ("status not a string", {"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": 1}),
    ("content not a list", {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": {}}),
    (
        "content item not an object",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [1]},
    ),
    (
        "content item without type",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]},
    ),
    (
        "content block missing",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{"type": "content"}]},
    ),
    (
        "diff without newText",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "path": "/p"}],
        },
    ),
    (
        "diff oldText not a string",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "path": "/p", "newText": "", "oldText": 1}],
        },
    ),
    (
        "client terminal content",
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c",
            "title": "T",
            "content": [{"type": "terminal", "terminalId": "t1"}],
        },
    ),
    (
        "locations not a list",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "locations": "x"},
    ),
    ("plan without entries", {"sessionUpdate": "plan"}),
    (
        "plan entry without priority",
        {"sessionUpdate": "plan", "entries": [{"content": "a", "status": "pending"}]},
    ),
    (
        "commands not a list",
        {"sessionUpdate": "available_commands_update", "availableCommands": None},
    ),
    (
        "command without description",
        {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "a"}]},
    ),
    (
        "command input without hint",
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "a", "description": "b", "input": {}}],
        },
    ),
    ("mode update without id", {"sessionUpdate": "current_mode_update"}),
    ("config options missing", {"sessionUpdate": "config_option_update"}),
    (
        "config option without id",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [{"name": "n", "type": "boolean"}],
        },
    ),
    (
        "config option without type",
        {"sessionUpdate": "config_option_update", "configOptions": [{"id": "i", "name": "n"}]},
    ),
    (
        "select without current value",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [{"id": "i", "name": "n", "type": "select", "options": []}],
        },
    ),
    (
        "select options not a list",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [
                {"id": "i", "name": "n", "type": "select", "currentValue": "a", "options": {}}
            ],
        },
    ),
    ("title not a string", {"sessionUpdate": "session_info_update", "title": 1}),
    ("updatedAt not a string", {"sessionUpdate": "session_info_update", "updatedAt": 1}),
    ("usage negative", {"sessionUpdate": "usage_update", "used": -1, "size": 10}),
    ("usage bool", {"sessionUpdate": "usage_update", "used": 1, "size": True}),
    ("usage missing size", {"sessionUpdate": "usage_update", "used": 1}),
    ("v2-only state", {"sessionUpdate": "state_update", "state": "running"}),
    ("v2-only message", {"sessionUpdate": "agent_message", "messageId": "m", "content": []}),
    (
        "v2-only plan",
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": []}},
    ),
]


@pytest.mark.parametrize(("why", "update"), BAD_V1, ids=[w for w, _ in BAD_V1])
def test_malformed_v1_updates_are_rejected(why: str, update: Any) -> None:
    with pytest.raises(InvalidParams):
        AgentV1Translator().update(update)


BAD_V2 = [
    ("not an object", None),
    ("variant missing", {}),
    ("chunk without id", {"sessionUpdate": "agent_message_chunk", "content": text("a")}),
    (
        "chunk block not an object",
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": 1},
    ),
    ("message id missing", {"sessionUpdate": "agent_message", "content": []}),
    (
        "message content not a list",
        {"sessionUpdate": "user_message", "messageId": "m", "content": "x"},
    ),
    (
        "message block without type",
        {"sessionUpdate": "user_message", "messageId": "m", "content": [{}]},
    ),
    ("tool call without id", {"sessionUpdate": "tool_call_update", "title": "T"}),
    (
        "tool title not a string",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": 1},
    ),
    (
        "tool content not a list",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": {}},
    ),
    (
        "tool item without type",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]},
    ),
    (
        "diff without changes",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{"type": "diff"}]},
    ),
    (
        "diff change without path",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "changes": [{"operation": "add"}]}],
        },
    ),
    (
        "diff patch without text",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "diff", "changes": [], "patch": {"format": "git_patch"}}],
        },
    ),
    (
        "terminal ref without id",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{"type": "terminal"}]},
    ),
    (
        "locations not a list",
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "locations": 1},
    ),
    (
        "content chunk without id",
        {"sessionUpdate": "tool_call_content_chunk", "content": {"type": "content"}},
    ),
    ("content chunk item missing", {"sessionUpdate": "tool_call_content_chunk", "toolCallId": "c"}),
    ("terminal without id", {"sessionUpdate": "terminal_update"}),
    (
        "terminal command not a string",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "command": 1},
    ),
    (
        "terminal output not an object",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "output": "x"},
    ),
    (
        "terminal output not base64",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "output": {"data": "!!"}},
    ),
    (
        "exit status not an object",
        {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": 0},
    ),
    ("output chunk without data", {"sessionUpdate": "terminal_output_chunk", "terminalId": "t"}),
    (
        "output chunk bad base64",
        {"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "a"},
    ),
    ("plan missing", {"sessionUpdate": "plan_update"}),
    ("plan without id", {"sessionUpdate": "plan_update", "plan": {"type": "items", "entries": []}}),
    (
        "plan entries missing",
        {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p"}},
    ),
    (
        "plan entry without status",
        {
            "sessionUpdate": "plan_update",
            "plan": {
                "type": "items",
                "planId": "p",
                "entries": [{"content": "a", "priority": "low"}],
            },
        },
    ),
    ("commands missing", {"sessionUpdate": "available_commands_update"}),
    (
        "command input not an object",
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "a", "input": 1}],
        },
    ),
    (
        "text input without hint",
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "a", "input": {"type": "text"}}],
        },
    ),
    ("config options missing", {"sessionUpdate": "config_option_update"}),
    (
        "config option without configId",
        {
            "sessionUpdate": "config_option_update",
            "configOptions": [{"name": "n", "type": "boolean"}],
        },
    ),
    ("info title not a string", {"sessionUpdate": "session_info_update", "title": 1}),
    ("usage missing", {"sessionUpdate": "usage_update", "size": 1}),
]


@pytest.mark.parametrize(("why", "update"), BAD_V2, ids=[w for w, _ in BAD_V2])
def test_malformed_v2_updates_are_rejected_by_the_renderer(why: str, update: Any) -> None:
    with pytest.raises(InvalidParams):
        ClientV1Renderer().update(update)


def test_a_rejected_update_leaves_the_renderer_state_unchanged() -> None:
    renderer = ClientV1Renderer()
    with pytest.raises(InvalidParams):
        renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [{}]})
    (out,) = renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": "T"})
    assert out["sessionUpdate"] == "tool_call"


# ---------------------------------------------------------------------------------------
# AgentV1Translator: the prompt turn, permissions, modes


def test_prompt_turn_is_synthesized_for_v1_agents(v2: Schema) -> None:
    translator = AgentV1Translator(id_prefix="hub-p-")
    before = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("a")})
    message_id, updates = translator.prompt_started([text("Fix the bug")])
    after = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("b")})
    finished = translator.prompt_finished("end_turn")
    assert message_id == "hub-p-2"
    assert updates == [
        {"sessionUpdate": "user_message", "messageId": "hub-p-2", "content": [text("Fix the bug")]},
        {"sessionUpdate": "state_update", "state": "running"},
    ]
    assert before[0]["messageId"] == "hub-p-1"
    assert after[0]["messageId"] == "hub-p-3"  # the prompt ended the previous message
    assert finished == [
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
    ]
    for update in [*updates, *finished]:
        check_v2_update(v2, update)


def test_prompt_failure_is_idle_without_stop_reason_and_the_error_in_meta(v2: Schema) -> None:
    error = RpcError(-32603, "Internal error", {"why": "boom"})
    (update,) = AgentV1Translator().prompt_failed(error)
    assert update == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "_meta": {
            "acp-hub": {
                "error": {"code": -32603, "message": "Internal error", "data": {"why": "boom"}}
            }
        },
    }
    check_v2_update(v2, update)


def test_prompt_inputs_are_checked() -> None:
    translator = AgentV1Translator()
    with pytest.raises(InvalidParams):
        translator.prompt_started(["hi"])
    with pytest.raises(InvalidParams):
        translator.prompt_finished(None)  # type: ignore[arg-type]


def test_default_ids_are_hub_prefixed_and_differ_between_translators() -> None:
    a = AgentV1Translator().mint_id()
    b = AgentV1Translator().mint_id()
    assert a.startswith("hub-")
    assert b.startswith("hub-")
    assert a != b


def test_permission_states_count_pending_requests() -> None:
    translator = AgentV1Translator()
    requires = [{"sessionUpdate": "state_update", "state": "requires_action"}]
    running = [{"sessionUpdate": "state_update", "state": "running"}]
    assert translator.permission_answered() == []
    assert translator.permission_pending() == requires
    assert translator.permission_pending() == requires
    assert translator.permission_answered() == []
    assert translator.permission_answered() == running
    assert translator.permission_answered() == []
    translator.permission_pending()
    translator.prompt_failed(internal_error())
    assert translator.permission_answered() == []  # the turn is over: no "running" after it
    translator.permission_pending()
    translator.prompt_finished("cancelled")
    assert translator.permission_answered() == []


def test_permission_pending_ends_an_id_less_message() -> None:
    translator = AgentV1Translator(id_prefix="m-")
    first = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("a")})
    translator.permission_pending()
    translator.update({"sessionUpdate": "agent_message_chunk", "content": text("b")})
    translator.permission_answered()
    third = translator.update({"sessionUpdate": "agent_message_chunk", "content": text("c")})
    assert first[0]["messageId"] == "m-1"
    assert third[0]["messageId"] == "m-3"


def test_session_setup_without_modes_or_options_says_nothing() -> None:
    translator = AgentV1Translator()
    assert translator.session_setup(None) == []
    assert translator.session_setup({"sessionId": "s"}) == []
    assert translator.config_options == []
    assert translator.mode_option_id is None


def test_agent_mode_option_wins_over_modes() -> None:
    translator = AgentV1Translator()
    option = {
        "id": "m",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": "a",
        "options": [],
    }
    (update,) = translator.session_setup(
        {
            "modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}]},
            "configOptions": [option],
        }
    )
    assert update["configOptions"] == config_options_v1_to_v2([option])
    assert translator.mode_option_id is None
    assert translator.update({"sessionUpdate": "current_mode_update", "currentModeId": "a"}) == []


def test_synthetic_mode_option_avoids_taken_ids_and_routes_to_set_mode(v2: Schema) -> None:
    translator = AgentV1Translator()
    taken = {"id": "mode", "name": "Other", "type": "boolean", "currentValue": True}
    (update,) = translator.session_setup(
        {
            "configOptions": [taken],
            "modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}]},
        }
    )
    check_v2_update(v2, update)
    assert translator.mode_option_id == "_hub_mode_2"
    assert [o["configId"] for o in update["configOptions"]] == ["_hub_mode_2", "mode"]
    params = {
        "sessionId": "s",
        "configId": "_hub_mode_2",
        "type": "id",
        "value": "a",
        "_meta": {"k": 1},
    }
    v2.check("SetSessionConfigOptionRequest", params)
    assert translator.set_config_option(params) == (
        "session/set_mode",
        {"sessionId": "s", "modeId": "a", "_meta": {"k": 1}},
    )
    with pytest.raises(InvalidParams):
        translator.set_config_option({**params, "type": "boolean", "value": True})
    # the agent's own option named "mode" is still routed as a config option
    assert translator.set_config_option(
        {"sessionId": "s", "configId": "mode", "type": "boolean", "value": False}
    ) == (
        "session/set_config_option",
        {"sessionId": "s", "configId": "mode", "type": "boolean", "value": False},
    )


def test_mode_updates_without_setup_and_unknown_modes_extend_the_option() -> None:
    translator = AgentV1Translator()
    (update,) = translator.update({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    (option,) = update["configOptions"]
    assert option["currentValue"] == "plan"
    assert option["options"] == [{"value": "plan", "name": "plan"}]
    (again,) = translator.mode_set("code")
    assert [c["value"] for c in again["configOptions"][0]["options"]] == ["plan", "code"]
    assert translator.config_options == again["configOptions"]


def test_set_config_option_for_a_v1_agent(v1: Schema) -> None:
    translator = AgentV1Translator()
    method, params = translator.set_config_option(
        {"sessionId": "s", "configId": "model", "type": "id", "value": "fast"}
    )
    assert (method, params) == (
        "session/set_config_option",
        {"sessionId": "s", "configId": "model", "value": "fast"},
    )
    v1.check("SetSessionConfigOptionRequest", params)
    with pytest.raises(TranslationError):
        translator.set_config_option(
            {"sessionId": "s", "configId": "x", "type": "_acme_range", "value": 3}
        )
    for bad in (
        {"sessionId": "s", "configId": "x", "type": "id", "value": 3},
        {"sessionId": "s", "configId": "x", "type": "boolean", "value": "yes"},
        {"sessionId": "s", "configId": "x", "value": "a"},
        {"configId": "x", "type": "id", "value": "a"},
    ):
        with pytest.raises(InvalidParams):
            translator.set_config_option(bad)


def test_set_config_option_result_keeps_the_synthetic_mode_option() -> None:
    translator = AgentV1Translator()
    translator.session_setup(
        {"modes": {"currentModeId": "a", "availableModes": [{"id": "a", "name": "A"}]}}
    )
    result = translator.set_config_option_result(
        {"configOptions": [{"id": "b", "name": "B", "type": "boolean", "currentValue": True}]}
    )
    assert [o["configId"] for o in result["configOptions"]] == ["mode", "b"]
    with pytest.raises(InvalidParams):
        translator.set_config_option_result({"configOptions": None})


def test_malformed_session_setup_is_rejected() -> None:
    bad: Any
    for bad in (
        {"modes": {"availableModes": []}},
        {"modes": {"currentModeId": "a", "availableModes": [{"id": "a"}]}},
        {"modes": {"currentModeId": "a"}},
        {"configOptions": "x"},
        [],
    ):
        with pytest.raises(InvalidParams):
            AgentV1Translator().session_setup(bad)


def test_session_setup_result_is_schema_valid(v1: Schema, v2: Schema) -> None:
    result = AGENT_CASES[8]["setup"]
    v1.check("NewSessionResponse", result)
    translator = AgentV1Translator()
    (update,) = translator.session_setup(result)
    check_v2_update(v2, update)
    v2.check("NewSessionResponse", {"sessionId": "s1", "configOptions": translator.config_options})


# ---------------------------------------------------------------------------------------
# ClientV1Renderer: state, replay, terminals


def test_render_replay_uses_fresh_state_and_leaves_the_live_renderer_alone() -> None:
    live = ClientV1Renderer()
    call = {"sessionUpdate": "tool_call_update", "toolCallId": "c", "title": "T"}
    message = {"sessionUpdate": "agent_message", "messageId": "m", "content": [text("a")]}
    live.update(call)
    live.update(message)
    replay = live.render_replay([call, message])
    assert replay[0]["sessionUpdate"] == "tool_call"
    assert "_meta" not in replay[1]  # not a replacement for the joiner
    assert live.update(call)[0]["sessionUpdate"] == "tool_call_update"
    assert live.update(message)[0]["_meta"] == {"acp-hub": {"replaces": "m"}}


def test_reset_forgets_everything() -> None:
    renderer = ClientV1Renderer()
    mode = {
        "sessionUpdate": "config_option_update",
        "configOptions": [
            {
                "configId": "m",
                "name": "M",
                "category": "mode",
                "type": "select",
                "currentValue": "a",
                "options": [],
            }
        ],
    }
    renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c"})
    renderer.update(mode)
    renderer.reset()
    assert (
        renderer.update({"sessionUpdate": "tool_call_update", "toolCallId": "c"})[0][
            "sessionUpdate"
        ]
        == "tool_call"
    )
    assert len(renderer.update(mode)) == 2  # the mode is announced again


def test_mode_option_removed_then_back_announces_the_mode_again() -> None:
    renderer = ClientV1Renderer()
    option = {
        "configId": "m",
        "name": "M",
        "category": "mode",
        "type": "select",
        "currentValue": "a",
        "options": [],
    }
    assert (
        len(renderer.update({"sessionUpdate": "config_option_update", "configOptions": [option]}))
        == 2
    )
    assert len(renderer.update({"sessionUpdate": "config_option_update", "configOptions": []})) == 1
    assert (
        len(renderer.update({"sessionUpdate": "config_option_update", "configOptions": [option]}))
        == 2
    )


def terminal_text(renderer: ClientV1Renderer, update: Json) -> str:
    (out,) = renderer.update(update)
    value: str = out["content"][0]["content"]["text"]
    return value


def test_terminal_bytes_are_bounded_cleared_and_exit_rendered() -> None:
    renderer = ClientV1Renderer(max_terminal_bytes=4)
    renderer.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [{"type": "terminal", "terminalId": "t"}],
        }
    )
    chunk = {
        "sessionUpdate": "terminal_output_chunk",
        "terminalId": "t",
        "data": base64.b64encode(b"abcdef").decode(),
    }
    assert terminal_text(renderer, chunk) == "cdef"
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "output": None}
        )
        == ""
    )
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": {}}
        )
        == "\n[exited]"
    )
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "exitStatus": None}
        )
        == ""
    )
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "command": "ls"}
        )
        == "$ ls\n"
    )
    assert (
        terminal_text(
            renderer, {"sessionUpdate": "terminal_update", "terminalId": "t", "command": None}
        )
        == ""
    )


def test_a_terminal_known_before_its_reference_is_shown_at_once() -> None:
    renderer = ClientV1Renderer()
    data = base64.b64encode(b"early\n").decode()
    assert (
        renderer.update({"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": data})
        == []
    )
    (out,) = renderer.update(
        {
            "sessionUpdate": "tool_call_content_chunk",
            "toolCallId": "c",
            "content": {"type": "terminal", "terminalId": "t"},
        }
    )
    assert out["sessionUpdate"] == "tool_call"
    assert out["content"][0]["content"] == text("early\n")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"\x1b[1;31mred\x1b[0m", "red"),
        (b"\x1b]0;title\x07after", "after"),
        (b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        (b"\x1bPq#0\x1b\\x", "x"),
        (b"a\x1b(Bb\x1b=c\x1b", "abc"),
        (b"\xc2\x9b2Jz", "z"),
        (b"10%\r50%\r100%\nnext", "100%\nnext"),
        (b"line\r\n", "line\n"),
        (b"bell\x07 nul\x00 tab\t", "bell nul tab\t"),
        (b"\xff ok", "\ufffd ok"),
    ],
)
def test_sanitize_terminal(raw: bytes, shown: str) -> None:
    assert sanitize_terminal(raw) == shown


# ---------------------------------------------------------------------------------------
# Permission requests and answers


V1_PERMISSION = {
    "sessionId": "s",
    "toolCall": {
        "toolCallId": "c",
        "title": "Allow editing /p/a?",
        "kind": "edit",
        "status": None,
        "content": [{"type": "diff", "path": "/p/a", "newText": "x\n"}],
    },
    "options": [
        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ],
    "_meta": {"t": 1},
}


def test_permission_request_v1_to_v2(v1: Schema, v2: Schema) -> None:
    v1.check("RequestPermissionRequest", V1_PERMISSION)
    out = permission_request_v1_to_v2(V1_PERMISSION)
    v2.check("RequestPermissionRequest", out)
    assert out == {
        "sessionId": "s",
        "title": "Allow editing /p/a?",
        "subject": {
            "type": "tool_call",
            "toolCall": {
                "toolCallId": "c",
                "title": "Allow editing /p/a?",
                "kind": "edit",
                "content": [
                    {
                        "type": "diff",
                        "changes": [{"operation": "add", "path": "/p/a", "fileType": "text"}],
                        "patch": {"format": "git_patch", "text": git_patch("/p/a", None, "x\n")},
                    }
                ],
            },
        },
        "options": V1_PERMISSION["options"],
        "_meta": {"t": 1},
    }


def test_permission_request_v1_without_title_or_options() -> None:
    params = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "c"},
        "options": [{"optionId": "a", "name": "A", "kind": "allow_once"}],
    }
    assert permission_request_v1_to_v2(params)["title"] == PERMISSION_TITLE
    with pytest.raises(InvalidParams):
        permission_request_v1_to_v2({**params, "options": []})
    with pytest.raises(InvalidParams):
        permission_request_v1_to_v2({**params, "options": [{"optionId": "a", "name": "A"}]})
    with pytest.raises(InvalidParams):
        permission_request_v1_to_v2({"sessionId": "s", "options": params["options"]})


OPTIONS_V2 = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "sess", "name": "Allow this session", "kind": "_acme_allow_session"},
]


def test_permission_request_v2_tool_call_subject(v1: Schema, v2: Schema) -> None:
    params = {
        "sessionId": "s",
        "title": "Run the tests?",
        "description": "They take a while",
        "subject": {
            "type": "tool_call",
            "toolCall": {
                "toolCallId": "c",
                "status": "cancelled",
                "content": [{"type": "terminal", "terminalId": "t1"}],
                "rawInput": None,
            },
        },
        "options": OPTIONS_V2,
    }
    v2.check("RequestPermissionRequest", params)
    out = permission_request_v2_to_v1(params)
    v1.check("RequestPermissionRequest", out)
    assert out == {
        "sessionId": "s",
        "toolCall": {
            "toolCallId": "c",
            "title": "Run the tests?",
            "status": "failed",
            "content": [
                {
                    "type": "content",
                    "content": text("[terminal t1]"),
                    "_meta": {"acp-hub": {"terminalId": "t1"}},
                }
            ],
            "_meta": {"acp-hub": {"status": "cancelled"}},
        },
        "options": [
            OPTIONS_V2[0],
            {
                **OPTIONS_V2[1],
                "kind": "reject_once",
                "_meta": {"acp-hub": {"kind": "_acme_allow_session"}},
            },
        ],
        "_meta": {"acp-hub": {"title": "Run the tests?", "description": "They take a while"}},
    }


def test_permission_request_v2_tool_call_subject_keeps_its_own_title() -> None:
    out = permission_request_v2_to_v1(
        {
            "sessionId": "s",
            "title": "Question?",
            "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c", "title": "Edit a"}},
            "options": OPTIONS_V2[:1],
            "_meta": {"mine": 1},
        }
    )
    assert out["toolCall"] == {"toolCallId": "c", "title": "Edit a"}
    assert out["_meta"] == {"mine": 1, "acp-hub": {"title": "Question?"}}


def test_permission_request_v2_command_subject(v1: Schema, v2: Schema) -> None:
    params = {
        "sessionId": "s",
        "title": "Run rm?",
        "description": "Deletes build output",
        "subject": {"type": "command", "command": "rm -rf build", "cwd": "/p", "toolCallId": "c9"},
        "options": OPTIONS_V2[:1],
    }
    v2.check("RequestPermissionRequest", params)
    out = permission_request_v2_to_v1(params)
    v1.check("RequestPermissionRequest", out)
    # an existing tool call is not given the description as content (it would replace)
    assert out["toolCall"] == {
        "toolCallId": "c9",
        "title": "Run rm?",
        "kind": "execute",
        "rawInput": {"command": "rm -rf build", "cwd": "/p"},
    }
    fresh = permission_request_v2_to_v1(
        {**params, "subject": {"type": "command", "command": "ls", "cwd": "/p"}}
    )
    assert fresh["toolCall"]["toolCallId"].startswith("hub-permission-")
    assert fresh["toolCall"]["content"] == [
        {"type": "content", "content": text("Deletes build output")}
    ]


def test_permission_request_v2_without_or_with_unknown_subject(v1: Schema) -> None:
    plain = permission_request_v2_to_v1(
        {"sessionId": "s", "title": "Continue?", "options": OPTIONS_V2[:1]}
    )
    v1.check("RequestPermissionRequest", plain)
    assert plain["toolCall"]["title"] == "Continue?"
    assert "content" not in plain["toolCall"]
    subject = {"type": "_acme_budget", "dollars": 5}
    odd = permission_request_v2_to_v1(
        {"sessionId": "s", "title": "Spend?", "subject": subject, "options": OPTIONS_V2[:1]}
    )
    v1.check("RequestPermissionRequest", odd)
    assert odd["_meta"]["acp-hub"]["subject"] == subject
    a = permission_request_v2_to_v1({"sessionId": "s", "title": "A", "options": OPTIONS_V2[:1]})
    assert a["toolCall"]["toolCallId"] != plain["toolCall"]["toolCallId"]


def test_malformed_v2_permission_requests_are_rejected() -> None:
    good = {"sessionId": "s", "title": "T", "options": OPTIONS_V2[:1]}
    for bad in (
        {**good, "title": None},
        {**good, "options": [{"optionId": "a"}]},
        {**good, "subject": {"type": "command", "command": "ls"}},
        {**good, "subject": {"type": "tool_call"}},
        {**good, "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c", "content": {}}}},
        {**good, "subject": "x"},
    ):
        with pytest.raises(InvalidParams):
            permission_request_v2_to_v1(bad)


OPTIONS = [
    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    "not an option",
]


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ({"outcome": "selected", "optionId": "yes"}, {"outcome": "selected", "optionId": "yes"}),
        (
            {"outcome": "selected", "optionId": "no", "_meta": {"k": 1}},
            {"outcome": "selected", "optionId": "no", "_meta": {"k": 1}},
        ),
        ({"outcome": "cancelled"}, {"outcome": "cancelled"}),
    ],
)
def test_valid_permission_outcomes(outcome: Any, expected: Json, v1: Schema) -> None:
    out = permission_outcome_for_agent(outcome, OPTIONS)
    assert out == expected
    v1.check("RequestPermissionOutcome", out)


@pytest.mark.parametrize(
    "outcome",
    [
        {"outcome": "selected", "optionId": "maybe"},
        {"outcome": "selected"},
        {"outcome": "selected", "optionId": 1},
        {"outcome": "_acme_allow_all"},
        {"outcome": "approved", "optionId": "yes"},
        {"optionId": "yes"},
        "selected",
        None,
    ],
)
def test_unknown_or_malformed_permission_outcomes_never_approve(outcome: Any) -> None:
    with pytest.raises(InvalidParams):
        permission_outcome_for_agent(outcome, OPTIONS)


# ---------------------------------------------------------------------------------------
# Capabilities, prompts, MCP servers, config options, stop reasons


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


def test_prompt_v2_to_v1(v1: Schema) -> None:
    link = {"type": "resource_link", "name": "a", "uri": "file:///a", "icons": [{"src": "x"}]}
    out = prompt_v2_to_v1([text("hi"), link])
    assert out == [text("hi"), {"type": "resource_link", "name": "a", "uri": "file:///a"}]
    for block in out:
        v1.check("ContentBlock", block)
    assert link["icons"] == [{"src": "x"}]
    with pytest.raises(TranslationError):
        prompt_v2_to_v1([{"type": "_acme_sketch"}])
    with pytest.raises(InvalidParams):
        prompt_v2_to_v1(["hi"])


def test_mcp_servers_v2_to_v1(v1: Schema, v2: Schema) -> None:
    servers: list[Json] = [
        {"type": "stdio", "name": "fs", "command": "/bin/fs"},
        {
            "type": "stdio",
            "name": "git",
            "command": "/bin/git",
            "args": ["-v"],
            "env": [{"name": "A", "value": "1"}],
        },
        {"type": "http", "name": "web", "url": "https://x/mcp"},
    ]
    for server in servers:
        v2.check("McpServer", server)
    out = mcp_servers_v2_to_v1(servers)
    for server in out:
        v1.check("McpServer", server)
    assert out == [
        {"name": "fs", "command": "/bin/fs", "args": [], "env": []},
        {
            "name": "git",
            "command": "/bin/git",
            "args": ["-v"],
            "env": [{"name": "A", "value": "1"}],
        },
        {"type": "http", "name": "web", "url": "https://x/mcp", "headers": []},
    ]
    assert mcp_servers_v1_to_v2(out) == [
        {"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [], "env": []},
        servers[1],
        {**servers[2], "headers": []},
    ]
    assert mcp_servers_v2_to_v1(None) == []
    with pytest.raises(TranslationError):
        mcp_servers_v2_to_v1(servers[2:], http=False)
    with pytest.raises(TranslationError):
        mcp_servers_v2_to_v1([{"type": "_acme_ws", "name": "w"}])
    with pytest.raises(InvalidParams):
        mcp_servers_v2_to_v1([{"type": "stdio", "name": "x"}])


def test_mcp_servers_v1_to_v2(v1: Schema, v2: Schema) -> None:
    servers: list[Json] = [
        {"name": "fs", "command": "/bin/fs", "args": [], "env": []},
        {
            "type": "http",
            "name": "web",
            "url": "https://x",
            "headers": [{"name": "A", "value": "b"}],
        },
    ]
    for server in servers:
        v1.check("McpServer", server)
    out = mcp_servers_v1_to_v2(servers)
    for server in out:
        v2.check("McpServer", server)
    assert mcp_servers_v2_to_v1(out) == servers  # lossless both ways
    assert mcp_servers_v1_to_v2(None) == []
    with pytest.raises(TranslationError):
        mcp_servers_v1_to_v2([{"type": "sse", "name": "s", "url": "https://x", "headers": []}])
    with pytest.raises(InvalidParams):
        mcp_servers_v1_to_v2([{"type": "ws", "name": "s"}])
    with pytest.raises(InvalidParams):
        mcp_servers_v1_to_v2([{"name": "s"}])


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


def test_config_options_round_trip_and_boolean_filter(v1: Schema, v2: Schema) -> None:
    for option in V2_OPTIONS:
        v2.check("SessionConfigOption", option)
    out = config_options_v2_to_v1(V2_OPTIONS)
    for option in out:
        v1.check("SessionConfigOption", option)
    assert config_options_v1_to_v2(out) == V2_OPTIONS
    assert [o["id"] for o in config_options_v2_to_v1(V2_OPTIONS, boolean=False)] == ["mode"]
    assert config_options_v2_to_v1([{"configId": "x", "name": "X", "type": "_acme"}]) == []
    assert config_options_v1_to_v2([{"id": "x", "name": "X", "type": "_acme"}]) == [
        {"configId": "x", "name": "X", "type": "_acme"}
    ]


def test_modes_from_config_options(v1: Schema) -> None:
    modes = modes_from_config_options(V2_OPTIONS)
    assert modes == {
        "currentModeId": "ask",
        "availableModes": [
            {"id": "ask", "name": "Ask", "description": "d"},
            {"id": "yolo", "name": "Yolo"},
        ],
    }
    v1.check("SessionModeState", modes)
    assert modes_from_config_options(V2_OPTIONS[1:]) is None
    flat = {**V2_OPTIONS[0], "options": [{"value": "a", "name": "A"}, "junk"]}
    assert modes_from_config_options(["junk", flat]) == {
        "currentModeId": "ask",
        "availableModes": [{"id": "a", "name": "A"}],
    }


def test_set_mode_and_set_config_option_from_v1_clients(v2: Schema) -> None:
    out = set_mode_v1_to_v2({"sessionId": "s", "modeId": "yolo"}, V2_OPTIONS)
    assert out == {"sessionId": "s", "configId": "mode", "type": "id", "value": "yolo"}
    v2.check("SetSessionConfigOptionRequest", out)
    with pytest.raises(TranslationError):
        set_mode_v1_to_v2({"sessionId": "s", "modeId": "a"}, V2_OPTIONS[1:])
    with pytest.raises(InvalidParams):
        set_mode_v1_to_v2({"sessionId": "s"}, V2_OPTIONS)
    untagged = set_config_option_v1_to_v2({"sessionId": "s", "configId": "m", "value": "a"})
    assert untagged == {"sessionId": "s", "configId": "m", "value": "a", "type": "id"}
    v2.check("SetSessionConfigOptionRequest", untagged)
    boolean = {"sessionId": "s", "configId": "w", "type": "boolean", "value": True}
    assert set_config_option_v1_to_v2(boolean) == boolean
    for bad in (
        {**boolean, "value": "yes"},
        {"sessionId": "s", "configId": "m", "type": "id", "value": "a"},
        {"sessionId": "s", "configId": "m", "value": 1},
    ):
        with pytest.raises(InvalidParams):
            set_config_option_v1_to_v2(bad)


@pytest.mark.parametrize(
    ("reason", "v1_reason"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("max_turn_requests", "max_turn_requests"),
        ("refusal", "refusal"),
        ("cancelled", "cancelled"),
        ("_acme_budget", "end_turn"),
        ("paused", "end_turn"),
    ],
)
def test_stop_reason_for_v1(reason: str, v1_reason: str, v1: Schema) -> None:
    assert stop_reason_for_v1(reason) == v1_reason
    v1.check("StopReason", v1_reason)


def test_placeholder_title_is_used_for_unnamed_tool_calls() -> None:
    (out,) = render({"sessionUpdate": "tool_call_update", "toolCallId": "c"})
    assert out["title"] == TOOL_TITLE


def test_every_exported_name_exists() -> None:
    import hub.protocol.translate as module

    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_unknown_v1_tool_content_items_are_kept_for_v2() -> None:
    item = {"type": "_acme_chart", "points": [1]}
    (out,) = AgentV1Translator().update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]}
    )
    assert out["content"] == [item]


def test_an_add_patch_without_final_newline_is_still_rebuilt() -> None:
    item = {
        "type": "diff",
        "changes": [{"operation": "add", "path": "/p/b"}],
        "patch": {"format": "git_patch", "text": "diff --git /p/b /p/b\n@@ -0,0 +1 @@\n+x"},
    }
    (out,) = render({"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]})
    assert out["content"] == [{"type": "diff", "path": "/p/b", "newText": "x\n"}]


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


def test_renderer_without_boolean_options_leaves_them_out() -> None:
    update = {"sessionUpdate": "config_option_update", "configOptions": V2_OPTIONS}
    renderer = ClientV1Renderer(boolean_options=False)
    (options, mode) = renderer.update(update)
    assert [o["id"] for o in options["configOptions"]] == ["mode"]
    assert mode == {"sessionUpdate": "current_mode_update", "currentModeId": "ask"}
    (replayed, _) = renderer.render_replay([update])
    assert replayed == options


def test_terminal_text_never_shows_half_a_character_while_streaming() -> None:
    from hub.protocol.translate import sanitize_terminal

    data = "héllo ✓ 😀 done".encode()
    for cut in range(len(data) + 1):
        text = sanitize_terminal(data[:cut])
        assert "\ufffd" not in text
        assert data.decode().startswith(text)
    assert sanitize_terminal(b"ok \xff bad") == "ok \ufffd bad"  # invalid bytes still shown


def test_terminal_text_does_not_repeat_a_command_the_output_already_shows() -> None:
    renderer = ClientV1Renderer()
    renderer.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "title": "run",
            "content": [{"type": "terminal", "terminalId": "t"}],
        }
    )
    out = renderer.update(
        {
            "sessionUpdate": "terminal_update",
            "terminalId": "t",
            "command": "pytest -q",
            "output": {"data": base64.b64encode(b"$ pytest -q\n3 passed\n").decode()},
        }
    )
    text = json.dumps(out)
    assert text.count("$ pytest -q") == 1
    plain = renderer.update(
        {
            "sessionUpdate": "terminal_update",
            "terminalId": "t",
            "output": {"data": base64.b64encode(b"3 passed\n").decode()},
        }
    )
    assert json.dumps(plain).count("$ pytest -q") == 1
