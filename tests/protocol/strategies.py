"""Hypothesis strategies for valid ACP v2 session updates and the hub's ``_hub_*`` variants.

Every update these strategies draw is valid: the v2 ones validate against
``schema/v2/schema.json#/$defs/SessionUpdate`` (``test_compact.py`` checks a sample) and
``SessionState.apply`` accepts all of them. Ids come from small pools so that streams hit
the same entities again (upserts, chunks after snapshots, clears).

Public strategies: ``v2_updates()``, ``hub_updates()``, ``updates()``, ``update_streams()``,
``terminal_chunks(terminal_id, data)`` and the building blocks they use.

For fuzzing the wire (a client or a lying agent; ``test_fuzz.py`` runs them against the
protocol core, a socket-level fuzzer can reuse them): ``golden_update(version)`` (the golden
fixtures), ``mutated(value)`` and ``mutated_updates(version)`` (changed types, keys, lengths,
nesting around the parser's depth limit and past what orjson writes), ``client_calls()`` and
``client_messages()`` (every method a client may call, well-formed or mutated), ``frames()``
(bytes: messages, batches around their bound, junk; ``encode_any`` writes any nesting). These
are not all valid.
"""

from __future__ import annotations

import base64
import copy
import functools
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.support import acp_schema

Update = dict[str, Any]


@functools.cache
def v2_schema() -> dict[str, Any]:
    """The v2 JSON schema (``tests.support.acp_schema``: skips, or fails in CI, when absent)."""
    path = acp_schema(2)
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


@functools.cache
def session_update_validator() -> Draft202012Validator:
    """A validator for one v2 ``update`` object (``#/$defs/SessionUpdate``).

    Like the schema it lets the removed names through as unknown variants."""
    schema = v2_schema()
    return Draft202012Validator(
        {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/SessionUpdate"}
    )


MESSAGE_IDS = ("m1", "m2", "m3", "m4")
TOOL_CALL_IDS = ("t1", "t2", "t3")
TERMINAL_IDS = ("term1", "term2")
PLAN_IDS = ("main", "side")
PERMISSION_IDS = ("p1", "p2")
CLIENT_IDS = ("c1", "c2", "c3")

_OMIT = object()

short_text = st.text(max_size=8)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-1000, max_value=1000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    short_text,
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(names, inner, max_size=3)),
    max_leaves=6,
)
json_objects = st.dictionaries(names, json_values, max_size=3)
metas = json_objects


def patched(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A v2 patch field: omitted (``_OMIT``), ``null`` or a value."""
    return st.one_of(st.just(_OMIT), st.none(), value)


def build(fields: dict[str, Any]) -> Update:
    """The update without the omitted fields."""
    return {k: v for k, v in fields.items() if v is not _OMIT}


# --- content --------------------------------------------------------------------------------

plain_text_blocks = st.builds(lambda t: {"type": "text", "text": t}, short_text)
content_blocks: st.SearchStrategy[Any] = st.one_of(
    plain_text_blocks,
    plain_text_blocks,  # weighted: streams are mostly plain text
    st.builds(
        lambda t, p: {"type": "text", "text": t, "annotations": {"priority": p}},
        short_text,
        st.floats(min_value=0, max_value=1, width=32),
    ),
    st.builds(lambda t, m: {"type": "text", "text": t, "_meta": m}, short_text, metas),
    st.builds(
        lambda d: {"type": "image", "data": base64.b64encode(d).decode(), "mimeType": "image/png"},
        st.binary(max_size=6),
    ),
    st.builds(lambda n: {"type": "resource_link", "name": n, "uri": f"file:///tmp/{n}"}, names),
    st.builds(lambda v: {"type": "_x_sticker", "value": v}, json_values),
)

tool_contents: st.SearchStrategy[Any] = st.one_of(
    st.builds(lambda b: {"type": "content", "content": b}, content_blocks),
    st.builds(
        lambda n, op: {"type": "diff", "changes": [{"operation": op, "path": f"/src/{n}"}]},
        names,
        st.sampled_from(["add", "delete", "modify"]),
    ),
    st.builds(lambda t: {"type": "terminal", "terminalId": t}, st.sampled_from(TERMINAL_IDS)),
    st.builds(lambda v: {"type": "_x_widget", "value": v}, json_values),
)
locations = st.builds(
    lambda n, line: build({"path": f"/src/{n}", "line": line}),
    names,
    st.one_of(st.just(_OMIT), st.integers(min_value=0, max_value=500)),
)


# --- v2 variants ----------------------------------------------------------------------------


@st.composite
def message_chunks(draw: st.DrawFn) -> Update:
    return build(
        {
            "sessionUpdate": draw(
                st.sampled_from(
                    ["user_message_chunk", "agent_message_chunk", "agent_thought_chunk"]
                )
            ),
            "messageId": draw(st.sampled_from(MESSAGE_IDS)),
            "content": draw(content_blocks),
            "_meta": draw(st.one_of(st.just(_OMIT), metas)),
        }
    )


@st.composite
def message_updates(draw: st.DrawFn) -> Update:
    return build(
        {
            "sessionUpdate": draw(
                st.sampled_from(["user_message", "agent_message", "agent_thought"])
            ),
            "messageId": draw(st.sampled_from(MESSAGE_IDS)),
            "content": draw(patched(st.lists(content_blocks, max_size=3))),
            "_meta": draw(patched(metas)),
        }
    )


@st.composite
def tool_call_updates(draw: st.DrawFn) -> Update:
    return build(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": draw(st.sampled_from(TOOL_CALL_IDS)),
            "title": draw(patched(short_text)),
            "kind": draw(patched(st.sampled_from(["read", "edit", "execute", "other", "_x_k"]))),
            "status": draw(
                patched(st.sampled_from(["pending", "in_progress", "completed", "cancelled"]))
            ),
            "content": draw(patched(st.lists(tool_contents, max_size=3))),
            "locations": draw(patched(st.lists(locations, max_size=2))),
            "rawInput": draw(patched(json_values)),
            "rawOutput": draw(patched(json_values)),
            "_meta": draw(patched(metas)),
        }
    )


@st.composite
def tool_call_content_chunks(draw: st.DrawFn) -> Update:
    return {
        "sessionUpdate": "tool_call_content_chunk",
        "toolCallId": draw(st.sampled_from(TOOL_CALL_IDS)),
        "content": draw(tool_contents),
    }


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# Bytes that like to be split badly: multi-byte UTF-8 and ANSI escape sequences.
terminal_bytes = st.lists(
    st.sampled_from(
        [b"ok ", b"\x1b[32m", b"\x1b[0m", "é".encode(), "€".encode(), "🙂".encode(), b"\r\n"]
    )
    | st.binary(max_size=4),
    max_size=6,
).map(b"".join)

exit_statuses = st.builds(
    lambda code, sig: build({"exitCode": code, "signal": sig}),
    patched(st.integers(min_value=0, max_value=255)),
    patched(st.sampled_from(["SIGTERM", "SIGKILL"])),
)


# One strategy per variant: alike in shape only.
@st.composite
def terminal_updates(draw: st.DrawFn) -> Update:
    return build(
        {
            "sessionUpdate": "terminal_update",
            "terminalId": draw(st.sampled_from(TERMINAL_IDS)),
            "command": draw(patched(short_text)),
            "cwd": draw(patched(st.builds(lambda n: f"/work/{n}", names))),
            "output": draw(patched(st.builds(lambda d: {"data": b64(d)}, terminal_bytes))),
            "exitStatus": draw(patched(exit_statuses)),
            "_meta": draw(patched(metas)),
        }
    )


def terminal_chunks(terminal_id: str, data: bytes, cuts: list[int]) -> list[Update]:
    """``data`` as ``terminal_output_chunk`` updates split at the offsets ``cuts``."""
    points = sorted({0, len(data), *(c for c in cuts if 0 <= c <= len(data))})
    if len(points) == 1:
        points.append(0)  # empty data: one empty chunk, which still creates the terminal
    return [
        {
            "sessionUpdate": "terminal_output_chunk",
            "terminalId": terminal_id,
            "data": b64(data[a:b]),
        }
        for a, b in itertools.pairwise(points)
    ]


@st.composite
def chunked_terminal_outputs(draw: st.DrawFn) -> list[Update]:
    """A run of output chunks for one terminal, cut at random byte offsets."""
    data = draw(terminal_bytes)
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(data)), max_size=4))
    return terminal_chunks(draw(st.sampled_from(TERMINAL_IDS)), data, cuts)


plan_entries = st.builds(
    lambda c, p, s: {"content": c, "priority": p, "status": s},
    short_text,
    st.sampled_from(["high", "medium", "low"]),
    st.sampled_from(["pending", "in_progress", "completed", "cancelled"]),
)
plan_updates = st.one_of(
    st.builds(
        lambda pid, entries: {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": pid, "entries": entries},
        },
        st.sampled_from(PLAN_IDS),
        st.lists(plan_entries, max_size=3),
    ),
    st.builds(
        lambda pid, v: {
            "sessionUpdate": "plan_update",
            "plan": {"type": "_x_canvas", "planId": pid, "v": v},
        },
        st.sampled_from(PLAN_IDS),
        json_values,
    ),
)

available_commands_updates = st.builds(
    lambda cmds: {"sessionUpdate": "available_commands_update", "availableCommands": cmds},
    st.lists(
        st.builds(
            lambda n, d, hint: build(
                {
                    "name": n,
                    "description": d,
                    "input": {"type": "text", "hint": hint} if hint else _OMIT,
                }
            ),
            names,
            short_text,
            short_text,
        ),
        max_size=3,
    ),
)

config_option_updates = st.builds(
    lambda mode, web: {
        "sessionUpdate": "config_option_update",
        "configOptions": [
            {
                "configId": "mode",
                "name": "Mode",
                "category": "mode",
                "type": "select",
                "currentValue": mode,
                "options": [{"value": "ask", "name": "Ask"}, {"value": "code", "name": "Code"}],
            },
            {"configId": "web", "name": "Web", "type": "boolean", "currentValue": web},
        ],
    },
    st.sampled_from(["ask", "code"]),
    st.booleans(),
)

session_info_updates = st.builds(
    lambda title, at, meta: build(
        {"sessionUpdate": "session_info_update", "title": title, "updatedAt": at, "_meta": meta}
    ),
    patched(short_text),
    patched(st.sampled_from(["2026-06-10T12:00:00Z", "2026-06-11T08:30:00+02:00"])),
    patched(metas),
)

usage_updates = st.builds(
    lambda used, size, cost: build(
        {"sessionUpdate": "usage_update", "used": used, "size": size, "cost": cost}
    ),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=0, max_value=10**6),
    patched(
        st.builds(
            lambda amount: {"amount": amount, "currency": "USD"},
            st.floats(min_value=0, max_value=100, allow_nan=False),
        )
    ),
)

state_updates = st.one_of(
    st.builds(
        lambda s: {"sessionUpdate": "state_update", "state": s},
        st.sampled_from(["running", "requires_action", "_x_paused"]),
    ),
    st.builds(
        lambda reason: build(
            {"sessionUpdate": "state_update", "state": "idle", "stopReason": reason}
        ),
        patched(st.sampled_from(["end_turn", "cancelled", "max_tokens", "refusal"])),
    ),
)

unknown_updates = st.builds(
    lambda name, v: {"sessionUpdate": name, "value": v},
    st.sampled_from(["_x_heartbeat", "_x_notice", "future_thing"]),
    json_values,
)


def v2_updates() -> st.SearchStrategy[Update]:
    """One valid v2 update of any variant (single terminal chunks included)."""
    # Repeats weight the choice: conversations are mostly messages and tool calls.
    return st.one_of(
        message_chunks(),
        message_chunks(),
        message_chunks(),
        message_updates(),
        message_updates(),
        tool_call_updates(),
        tool_call_updates(),
        tool_call_content_chunks(),
        terminal_updates(),
        chunked_terminal_outputs().map(lambda chunks: chunks[0]),
        plan_updates,
        available_commands_updates,
        config_option_updates,
        session_info_updates,
        usage_updates,
        state_updates,
        unknown_updates,
    )


# --- hub variants ---------------------------------------------------------------------------

clients = st.builds(
    lambda cid, role, version: {
        "clientId": cid,
        "name": f"user-{cid}",
        "role": role,
        "since": "2026-06-10T12:00:00Z",
        "protocolVersion": version,
    },
    st.sampled_from(CLIENT_IDS),
    st.sampled_from(["owner", "driver", "observer"]),
    st.sampled_from([1, 2]),
)
permission_requests = st.builds(
    lambda title: {
        "title": title,
        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
    },
    short_text,
)


@st.composite
def hub_permissions(draw: st.DrawFn) -> Update:
    status = draw(st.sampled_from(["pending", "resolved", "cancelled", "timed_out"]))
    update: Update = {
        "sessionUpdate": "_hub_permission",
        "permissionId": draw(st.sampled_from(PERMISSION_IDS)),
        "status": status,
    }
    if status == "pending":
        update["request"] = draw(permission_requests)
    elif status == "resolved":
        update["resolvedBy"] = {"clientId": draw(st.sampled_from(CLIENT_IDS)), "name": "x"}
        update["outcome"] = {"outcome": "selected", "optionId": "allow"}
    return update


def hub_updates(*, reset: bool = True) -> st.SearchStrategy[Update]:
    """One valid ``_hub_*`` update (``_hub_reset`` only when ``reset``)."""
    choices: list[st.SearchStrategy[Update]] = [
        st.builds(
            lambda cs: {"sessionUpdate": "_hub_presence", "clients": cs},
            st.lists(clients, max_size=3),
        ),
        st.builds(
            lambda added, removed, n: {
                "sessionUpdate": "_hub_presence",
                "added": added,
                "removed": removed,
                "count": n,
                "viewers": 0,
            },
            st.lists(clients, max_size=3),
            st.lists(st.sampled_from(CLIENT_IDS), max_size=2),
            st.integers(0, 5),
        ),
        st.builds(
            lambda qs: {
                "sessionUpdate": "_hub_queue",
                "entries": [
                    {"queueId": f"q{i}", "clientId": c, "name": c, "preview": "p", "queuedAt": "t"}
                    for i, c in enumerate(qs)
                ],
            },
            st.lists(st.sampled_from(CLIENT_IDS), max_size=3),
        ),
        st.builds(
            lambda mid, cid: {
                "sessionUpdate": "_hub_prompt",
                "messageId": mid,
                "clientId": cid,
                "name": cid,
            },
            st.sampled_from(MESSAGE_IDS),
            st.sampled_from(CLIENT_IDS),
        ),
        hub_permissions(),
        st.builds(
            lambda status, code: build(
                {"sessionUpdate": "_hub_agent", "agent": "demo", "status": status, "exitCode": code}
            ),
            st.sampled_from(["started", "exited", "restarted", "lost"]),
            st.one_of(st.just(_OMIT), st.integers(min_value=0, max_value=255)),
        ),
        st.builds(
            lambda holder: {
                "sessionUpdate": "_hub_lease",
                "holder": holder and {"clientId": holder, "name": holder},
            },
            st.one_of(st.none(), st.sampled_from(CLIENT_IDS)),
        ),
        st.builds(
            lambda p, q: {"sessionUpdate": "_hub_policy", "prompt": p, "permission": q},
            st.sampled_from(["queue", "reject", "lease"]),
            st.sampled_from(["first", "owner", "lease", "designated", "consensus"]),
        ),
    ]
    if reset:
        choices.append(st.just({"sessionUpdate": "_hub_reset", "reason": "test", "epoch": 1}))
    return st.one_of(*choices)


@st.composite
def updates(draw: st.DrawFn) -> Update:
    """One valid update: mostly v2, some hub variants, rarely a ``_hub_reset`` (which wipes
    everything before it, so it must not dominate a stream)."""
    roll = draw(st.integers(min_value=0, max_value=49))
    if roll == 0:
        return {"sessionUpdate": "_hub_reset", "reason": "test", "epoch": 1}
    if roll < 12:
        return draw(hub_updates(reset=False))
    return draw(v2_updates())


def _flatten(groups: list[list[Update]]) -> list[Update]:
    return [update for group in groups for update in group]


def update_streams(
    max_size: int = 40,
    single: Callable[[], st.SearchStrategy[Update]] = updates,
    min_size: int = 0,
) -> st.SearchStrategy[list[Update]]:
    """A valid stream: single updates mixed with runs of chunked terminal output
    (``min_size``/``max_size`` count single updates and runs alike)."""
    one = single().map(lambda u: [u])
    return st.lists(
        st.one_of(one, one, one, chunked_terminal_outputs()), min_size=min_size, max_size=max_size
    ).map(_flatten)


# --- wire fuzzing: the golden fixtures, valid client messages and mutations of both -----------
# For fuzzers that drive the hub over a socket (as a client, or as a lying agent): every
# strategy here draws plain JSON values (or frames of bytes) and needs no hub to run.

FIXTURES = Path(__file__).parent / "fixtures"

ODD_STRINGS = ("", " ", "\x00", "\u202e", "😀" * 3, "a" * 10_000, "../../etc/passwd", "s-nope")
ODD_SCALARS: tuple[Any, ...] = (None, True, False, 0, -1, 2**53, 2**63 - 1, -(2**63), 1.5, 1e308)


@functools.cache
def golden_updates(version: int) -> tuple[Update, ...]:
    """Every session update of the golden fixtures in protocol ``version`` (1 or 2; the v2 set
    holds the hub's ``_hub_*`` variants too)."""
    out: list[Update] = []
    for name in ("agent_v1_to_v2.json", "client_v2_to_v1.json"):
        for case in json.loads((FIXTURES / "translate" / name).read_text()):
            out += case["v1" if version == 1 else "v2"]
    if version == 2:
        for name in ("v2_updates.json", "hub_updates.json"):
            out += json.loads((FIXTURES / name).read_text()).values()
    return tuple(out)


def golden_update(version: int) -> st.SearchStrategy[Update]:
    """One update of the golden fixtures (a fresh copy: mutate it freely)."""
    return st.sampled_from(golden_updates(version)).map(copy.deepcopy)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path (keys and indices) of every node of ``value``, ``()`` for the root."""
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.copy(value)
    out[path[0]] = _replace(value[path[0]], path[1:], new)
    return out


def nest(value: Any, levels: int) -> Any:
    """``value`` wrapped in ``levels`` alternating arrays and objects."""
    for level in range(levels):
        value = [value] if level % 2 else {"_": value}
    return value


@st.composite
def _mutation(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with one node changed: its type, its keys, its length or its depth."""
    path = draw(st.sampled_from(_paths(value)))
    node = value
    for step in path:
        node = node[step]
    kind = draw(st.sampled_from(("type", "scalar", "string", "keys", "items", "nest")))
    new: Any
    if kind == "type":
        new = draw(st.sampled_from((None, 0, "x", [], {}, [node], {"_": node})))
    elif kind == "scalar":
        new = draw(st.sampled_from(ODD_SCALARS))
    elif kind == "string":
        new = draw(st.sampled_from(ODD_STRINGS) | st.text(max_size=20))
    elif kind == "keys" and isinstance(node, dict):
        keys = dict(node)
        if len(node) > 0 and draw(st.booleans()):
            del keys[draw(st.sampled_from(sorted(node)))]
        else:
            key = draw(st.sampled_from(("_meta", "sessionId", "id", "type", "")) | names)
            keys[key] = draw(json_values)
        new = keys
    elif kind == "items" and isinstance(node, list):
        new = [] if not node or draw(st.booleans()) else node + node[:1] * draw(st.integers(1, 50))
    else:
        # Deep nesting: around the parser's limit (64), and past what orjson writes (254).
        new = nest(node, draw(st.sampled_from((2, 58, 59, 60, 61, 62, 63, 64, 300))))
    return _replace(value, path, new)


def mutated(value: Any, max_steps: int = 3) -> st.SearchStrategy[Any]:
    """``value`` after 1 to ``max_steps`` mutations (``_mutation``)."""

    def step(values: st.SearchStrategy[Any], _: int) -> st.SearchStrategy[Any]:
        return values.flatmap(_mutation)

    return st.integers(1, max_steps).flatmap(
        lambda n: functools.reduce(step, range(n), st.just(value))
    )


def mutated_updates(version: int) -> st.SearchStrategy[Any]:
    """A golden update of ``version``, mutated (what a lying agent might send)."""
    return golden_update(version).flatmap(mutated)


PROMPT_BLOCKS: tuple[dict[str, Any], ...] = (
    {"type": "text", "text": "say hello"},
    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    {"type": "resource_link", "name": "app.py", "uri": "file:///work/app.py"},
    {"type": "resource", "resource": {"uri": "file:///work/a.txt", "text": "a"}},
    {"type": "_acme_chart", "points": [1, 2]},
)


@st.composite
def client_calls(draw: st.DrawFn, session_ids: tuple[str, ...] = ("s-1",)) -> dict[str, Any]:
    """A well-formed client -> hub request or notification (``docs/protocol.md``) about one of
    ``session_ids``; its id is a small integer or string."""
    sid = draw(st.sampled_from(session_ids))
    blocks = draw(st.lists(st.sampled_from(PROMPT_BLOCKS), min_size=1, max_size=3))
    params_by_method: dict[str, dict[str, Any]] = {
        "initialize": {"protocolVersion": 2, "info": {"name": "fuzz", "version": "1"}},
        "session/new": {"cwd": "/tmp", "mcpServers": []},
        "session/list": {},
        "session/resume": {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}},
        "session/load": {"sessionId": sid, "cwd": "/tmp", "mcpServers": []},
        "session/attach": {"sessionId": sid},
        "session/detach": {"sessionId": sid},
        "session/prompt": {"sessionId": sid, "prompt": blocks},
        "session/set_config_option": {
            "sessionId": sid,
            "configId": "mode",
            "type": "id",
            "value": "ask",
        },
        "session/set_mode": {"sessionId": sid, "modeId": "ask"},
        "session/close": {"sessionId": sid},
        "session/delete": {"sessionId": sid},
        "_hub/set_policy": {"sessionId": sid, "prompt": "queue"},
        "_hub/lease/request": {"sessionId": sid},
        "_hub/lease/release": {"sessionId": sid},
        "_hub/queue/withdraw": {"sessionId": sid, "queueId": "q-1"},
        "_hub/agent_stderr": {"agent": "scripted"},
        "session/cancel": {"sessionId": sid},
        "$/cancel_request": {"requestId": 1},
    }
    method = draw(st.sampled_from(sorted(params_by_method)))
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if method not in ("session/cancel", "$/cancel_request"):
        message["id"] = draw(st.integers(1, 10_000) | st.text(min_size=1, max_size=8))
    message["params"] = params_by_method[method]
    return message


def client_messages(session_ids: tuple[str, ...] = ("s-1",)) -> st.SearchStrategy[Any]:
    """What a client might send: well-formed calls, mutations of them, and answers to the
    hub's requests (a permission outcome), well-formed or not."""
    answers = st.builds(
        lambda request_id, outcome: {"jsonrpc": "2.0", "id": request_id, "result": outcome},
        st.integers(0, 100),
        st.sampled_from(
            (
                {"outcome": {"outcome": "selected", "optionId": "allow"}},
                {"outcome": {"outcome": "cancelled"}},
            )
        ),
    )
    valid = client_calls(session_ids) | answers
    return valid | valid.flatmap(mutated)


def encode_any(value: Any) -> bytes:
    """``value`` as JSON bytes, also nested past the 254 levels orjson writes."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False).encode()


def frames(session_ids: tuple[str, ...] = ("s-1",)) -> st.SearchStrategy[bytes]:
    """One WebSocket text frame or stdio line's worth of bytes: an encoded message, a batch
    (around the bound of 32 entries), or junk (not JSON, invalid UTF-8, a truncated message,
    nesting past what orjson reads)."""
    messages = client_messages(session_ids)
    encoded = messages.map(encode_any)
    batches = st.lists(messages, min_size=0, max_size=40).map(encode_any)
    junk = st.sampled_from(
        (
            b"",
            b"null",
            b"[]",
            b"{",
            b'{"jsonrpc":"2.0","id":1,"method":"session/list"',
            b"\xff\xfe",
            b'"\xed\xa0\x80"',
            b"[" * 1100 + b"]" * 1100,
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + b"[" * 300 + b"]" * 300 + b"}",
        )
    )
    return st.one_of(encoded, batches, junk, st.binary(max_size=64))
