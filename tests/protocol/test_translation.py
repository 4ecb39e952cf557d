"""v1 <-> v2 translation end to end: golden streams against both schemas, round trips
through both translators, and what survives them (``_meta``, extensions)."""

from __future__ import annotations

import copy

import pytest

from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.client_v1 import ClientV1Renderer
from tests.protocol.translation import (
    AGENT_CASES,
    CLIENT_CASES,
    Json,
    Schema,
    check_v2_update,
    is_extension,
    render,
    run_agent,
    run_client,
    text,
)


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


def test_every_exported_name_exists_and_no_module_is_oversized() -> None:
    import importlib
    import pkgutil

    import hub.protocol

    for info in pkgutil.iter_modules(hub.protocol.__path__):
        module = importlib.import_module(f"hub.protocol.{info.name}")
        missing = [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
        assert missing == [], info.name
        assert module.__file__ is not None
        with open(module.__file__, encoding="utf-8") as source:
            assert sum(1 for _ in source) <= 600, f"{info.name} is past about 600 lines"
