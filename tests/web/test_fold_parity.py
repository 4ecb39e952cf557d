"""The browser's fold (``hub/web/static/fold.js``) agrees with the hub's
(``hub.protocol.state.SessionState``).

Both fold the same streams: the golden fixtures of ``tests/protocol/fixtures`` in several
orders, hand-written streams for the rules where a careless fold goes wrong (patches that
clear, chunks after whole messages, presence deltas, a reset), hypothesis-drawn streams of
valid updates, and the compaction of each stream (what a late joiner replays). The browser
runs ``fold.js`` in Chromium; the two states are compared through one canonical projection
that both sides can produce (``project_python`` and ``js/fold_projection.js``): everything the page
shows, with no tolerance beyond what the projection drops on purpose (listed there).
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from hub.protocol.compact import compact
from hub.protocol.state import SessionState
from tests.protocol import strategies as sts

FIXTURES = Path(__file__).parent.parent / "protocol" / "fixtures"

Update = dict[str, Any]

KINDS = {"user_message": "user", "agent_message": "agent", "agent_thought": "thought"}
TERMINAL_FIELDS = ("command", "cwd", "exitStatus")

# The projection drops on purpose: the update-level `_meta` of whole-state snapshots (plans,
# commands, config options, state), unknown terminal fields (the page shows command, cwd and
# exit status only) and the coalescing details of presence (`joined`, `left`, `changes`),
# none of which the page shows; it maps the hub's empty collections (never set) to `[]`.
PROJECT_JS = (Path(__file__).parent / "js" / "fold_projection.js").read_text()


def project_python(state: SessionState) -> dict[str, Any]:
    """The canonical projection of the hub's fold (the same shape as ``PROJECT_JS``)."""
    snap = state.snapshot()
    timeline: list[dict[str, Any]] = []
    for entry in snap["timeline"]:
        if entry["type"] == "message":
            timeline.append(
                {
                    "message": entry["id"],
                    "kind": KINDS[entry["kind"]],
                    "content": entry["content"],
                    "fields": entry["fields"],
                }
            )
        else:
            timeline.append({"toolCall": entry["id"], "fields": entry["fields"]})
    hub = snap["hub"]
    presence = hub.get("_hub_presence", {"clients": []})
    clients = presence["clients"]
    count = presence.get("count")
    viewers = presence.get("viewers")
    state_payload = snap["state"]
    return numbers_as_floats(  # type: ignore[no-any-return]
        json.loads(
            json.dumps(
                {
                    "timeline": timeline,
                    "terminals": {
                        terminal_id: {
                            "fields": {
                                k: v for k, v in t["fields"].items() if k in TERMINAL_FIELDS
                            },
                            "output": t["output"],
                        }
                        for terminal_id, t in snap["terminals"].items()
                    },
                    "plans": {plan_id: p["plan"] for plan_id, p in snap["plans"].items()},
                    "info": snap["info"],
                    "configOptions": (snap["configOptions"] or {}).get("configOptions", []),
                    "commands": (snap["commands"] or {}).get("availableCommands", []),
                    "usage": snap["usage"],
                    "state": None
                    if state_payload is None
                    else {
                        "state": state_payload["state"],
                        "stopReason": state_payload.get("stopReason"),
                    },
                    "presence": {
                        "clients": clients,
                        "count": count if isinstance(count, int) else len(clients),
                        "viewers": viewers
                        if isinstance(viewers, int)
                        else sum(1 for c in clients if c.get("role") == "viewer"),
                    },
                    "queue": hub.get("_hub_queue", {}).get("entries", []),
                    "agent": hub.get("_hub_agent"),
                    "lease": hub.get("_hub_lease"),
                    "policy": hub.get("_hub_policy"),
                    "prompts": snap["prompts"],
                    "permissions": snap["permissions"],
                    "extras": snap["extras"],
                }
            )
        )
    )


def numbers_as_floats(value: Any) -> Any:
    """Every number as a float: JavaScript has one number type and writes an integral double
    without a fraction, so the transport, not the fold, would otherwise tell 1e16 from 10**16."""
    if isinstance(value, dict):
        return {k: numbers_as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers_as_floats(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def fold_python(stream: list[Update]) -> SessionState:
    # The fold keeps references to the updates: give it its own copy.
    return SessionState().apply_all(copy.deepcopy(stream))


def fold_js(page: Any, streams: list[list[Update]]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = numbers_as_floats(page.evaluate(PROJECT_JS, streams))
    return result


def assert_same_folds(page: Any, streams: list[list[Update]]) -> None:
    """Each stream, and the compaction of its fold, folds in the browser to the hub's state."""
    states = [fold_python(stream) for stream in streams]
    compacted = [compact(state) for state in states]
    browser = fold_js(page, [*streams, *compacted])
    for index, state in enumerate(states):
        expected = project_python(state)
        assert browser[index] == expected, f"stream {index}: {json.dumps(streams[index])}"
        assert browser[len(streams) + index] == expected, f"compaction of stream {index}"


def _fixtures() -> tuple[dict[str, Update], dict[str, Update]]:
    v2 = json.loads((FIXTURES / "v2_updates.json").read_text())
    hub = json.loads((FIXTURES / "hub_updates.json").read_text())
    return v2, hub


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def golden_streams() -> list[list[Update]]:
    """The golden fixtures: every variant alone, all in file order, reversed, and with the
    reset in the middle."""
    v2, hub = _fixtures()
    every = [*v2.values(), *(u for name, u in hub.items() if name != "_hub_reset")]
    streams: list[list[Update]] = [[update] for update in [*v2.values(), *hub.values()]]
    streams.append(every)
    streams.append(list(reversed(every)))
    half = len(every) // 2
    streams.append([*every[:half], hub["_hub_reset"], *every[half:]])
    return streams


def edge_streams() -> list[list[Update]]:
    """The rules a fold most easily gets wrong, each in a stream of its own."""
    text = {"type": "text", "text": "a"}
    annotated = {"type": "text", "text": "b", "annotations": {"priority": 1}}
    chunk = "agent_message_chunk"
    return [
        # Plain text chunks join; an annotated text block stays whole; text after it is new.
        [
            {"sessionUpdate": chunk, "messageId": "m", "content": text},
            {"sessionUpdate": chunk, "messageId": "m", "content": {"type": "text", "text": "b"}},
            {"sessionUpdate": chunk, "messageId": "m", "content": annotated},
            {"sessionUpdate": chunk, "messageId": "m", "content": {"type": "text", "text": "c"}},
            {"sessionUpdate": chunk, "messageId": "m", "content": {"type": "text", "text": "d"}},
        ],
        # A whole message replaces its chunks, keeps `_meta`; a chunk extends its last text;
        # `content: null` clears it; the kind follows the latest update about the id.
        [
            {"sessionUpdate": chunk, "messageId": "m", "content": text},
            {
                "sessionUpdate": "agent_message",
                "messageId": "m",
                "content": [text, text],
                "_meta": {"k": 1},
            },
            {"sessionUpdate": chunk, "messageId": "m", "content": {"type": "text", "text": "z"}},
            {"sessionUpdate": "agent_thought_chunk", "messageId": "m", "content": text},
            {"sessionUpdate": "agent_message", "messageId": "n", "content": [text]},
            {"sessionUpdate": "agent_message", "messageId": "n", "content": None, "_meta": None},
        ],
        # Tool calls: null and [] clear, chunks append to content, fields merge.
        [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "title": "x",
                "kind": "read",
                "locations": [{"path": "/a"}],
                "content": [{"type": "content", "content": text}],
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t",
                "title": None,
                "locations": [],
            },
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": "t",
                "content": {"type": "terminal", "terminalId": "term"},
            },
            {"sessionUpdate": "tool_call_update", "toolCallId": "u", "content": []},
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": "u",
                "content": {"type": "content", "content": text},
            },
            {"sessionUpdate": "tool_call_update", "toolCallId": "t", "status": "completed"},
        ],
        # Terminal bytes: chunks split inside a UTF-8 code point; a snapshot replaces them.
        [
            {
                "sessionUpdate": "terminal_output_chunk",
                "terminalId": "x",
                "data": _b64("é".encode()[:1]),
            },
            {
                "sessionUpdate": "terminal_output_chunk",
                "terminalId": "x",
                "data": _b64("é".encode()[1:]),
            },
            {"sessionUpdate": "terminal_update", "terminalId": "y", "command": "ls", "cwd": "/"},
            {
                "sessionUpdate": "terminal_update",
                "terminalId": "y",
                "output": {"data": _b64(b"\x1b[1mok")},
                "exitStatus": {"exitCode": 0},
                "cwd": None,
            },
            {"sessionUpdate": "terminal_output_chunk", "terminalId": "y", "data": _b64(b"!")},
        ],
        # Presence: a full form, then deltas that remove, replace in place and append.
        [
            {
                "sessionUpdate": "_hub_presence",
                "clients": [
                    {"clientId": "a", "name": "a", "role": "owner"},
                    {"clientId": "b", "name": "b", "role": "viewer"},
                    {"clientId": "c", "name": "c", "role": "driver"},
                ],
                "count": 3,
                "viewers": 1,
            },
            {
                "sessionUpdate": "_hub_presence",
                "added": [
                    {"clientId": "a", "name": "A", "role": "owner"},
                    {"clientId": "d", "name": "d", "role": "viewer"},
                ],
                "removed": ["b"],
                "count": 3,
                "viewers": 1,
                "joined": "d",
            },
            {
                "sessionUpdate": "_hub_presence",
                "added": [],
                "removed": ["zz"],
                "count": 7,
                "viewers": 5,
            },
        ],
        # Permission records merge; a later status replaces; null fields stay as given.
        [
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": "p",
                "status": "pending",
                "request": {"title": "t", "options": []},
            },
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": "p",
                "status": "resolved",
                "resolvedBy": {"clientId": "a", "name": "a", "role": "owner"},
                "outcome": {"outcome": "selected", "optionId": "allow"},
            },
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": "q",
                "status": "cancelled",
                "outcome": None,
            },
        ],
        # Session info patches; snapshots replace; unknown variants keep the latest.
        [
            {"sessionUpdate": "session_info_update", "title": "one", "updatedAt": "t"},
            {"sessionUpdate": "session_info_update", "title": None},
            {"sessionUpdate": "_x_note", "n": 1},
            {"sessionUpdate": "_x_note", "n": 2},
            {"sessionUpdate": "state_update", "state": "running"},
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"},
            {
                "sessionUpdate": "_hub_prompt",
                "messageId": "m",
                "clientId": "a",
                "name": "a",
                "role": "driver",
            },
        ],
    ]


def test_golden_fixtures_fold_alike(module_page: Any) -> None:
    assert_same_folds(module_page, golden_streams())


def test_edge_cases_fold_alike(module_page: Any) -> None:
    assert_same_folds(module_page, edge_streams())


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(stream=sts.update_streams(max_size=30))
def test_drawn_streams_fold_alike(module_page: Any, stream: list[Update]) -> None:
    assert_same_folds(module_page, [stream])


def test_the_comparison_sees_a_divergence(module_page: Any) -> None:
    """The projection is not blind: states that differ in one detail compare unequal."""
    v2, _ = _fixtures()
    stream = list(v2.values())
    browser = fold_js(module_page, [stream])[0]
    assert browser == project_python(fold_python(stream))
    # The parity scenario's updates, alike in shape to test_state.py's only.
    # One chunk more on the hub's side only: a text, a tool call's content, a terminal byte.
    for extra in (
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "msg_agent_1",
            "content": {"type": "text", "text": "!"},
        },
        {
            "sessionUpdate": "tool_call_content_chunk",
            "toolCallId": "call_001",
            "content": {"type": "terminal", "terminalId": "t2"},
        },
        {"sessionUpdate": "terminal_output_chunk", "terminalId": "term_1", "data": _b64(b"!")},
    ):
        assert browser != project_python(fold_python([*stream, extra])), extra
