"""A lying agent: a generated stream of broken and hostile messages from an agent process.

The corpus is drawn by hypothesis (valid v2 updates from ``tests.protocol.strategies``,
mutated, plus requests, answers, notifications and raw bytes an agent may write) and written,
line by line, by the scripted agent (``replay-lines``) in the middle of a prompt turn of a
real hub, while other clients follow that session and a turn streams in a session of another
agent. ``ACP_HUB_FUZZ_MESSAGES`` sets the corpus size (default 2,000), ``ACP_HUB_FUZZ_SEED``
the seed (printed on failure).

What must hold, whatever the agent writes:

* the hub logs no traceback and nothing at error level (the agent's mistakes are warnings);
* every client of the session sees contiguous seqs (v1 clients with the hub's events too),
  and what it saw folds (``SessionState``) to the hub's own state; a late joiner's replay
  folds to it as well;
* the session is not wedged: the turn ends, and a new prompt in it finishes a turn;
* a watcher of a session of another agent sees its turn with no gap, and a fresh session
  on that agent finishes a turn afterwards.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub.protocol.state import SessionState
from hub.settings import Settings
from tests.protocol.strategies import json_values, v2_updates
from tests.server.harness import AcpClient, HubHandle, acp_client, running_hub, scripted_agent

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]

MESSAGES = int(os.environ.get("ACP_HUB_FUZZ_MESSAGES", "2000"))
SEED = int(os.environ.get("ACP_HUB_FUZZ_SEED", str(random.randrange(1 << 30))))
WAIT = 120 + MESSAGES / 20
"""Seconds any one step may take (a larger corpus takes longer to write and to read)."""
MAX_LINE = 256 * 1024
"""The hub's ``max_line_bytes`` in this test: the corpus has a few lines over it."""

SESSION = "@SESSION@"  # the scripted agent writes its own session id here
DONE = "fuzz-turn-over-7f3a"
AFTER = "storm-over-91c2"

VARIANTS = [
    "agent_message_chunk",
    "user_message_chunk",
    "agent_thought_chunk",
    "user_message",
    "agent_message",
    "agent_thought",
    "tool_call_update",
    "tool_call_content_chunk",
    "terminal_update",
    "terminal_output_chunk",
    "plan_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
    "state_update",
    "available_commands_update",
    # v1 names (removed in v2): translated when well-formed
    "tool_call",
    "plan",
    "current_mode_update",
    # the hub's own and unknown ones
    "_hub_agent",
    "_hub_reset",
    "_hub_permission",
    "_x_vendor",
    "future_thing",
    "",
]

AGENT_REQUESTS = [
    "session/request_permission",
    "elicitation/create",
    "fs/read_text_file",
    "fs/write_text_file",
    "terminal/create",
    "terminal/output",
    "terminal/kill",
    "terminal/release",
    "terminal/wait_for_exit",
    "session/new",
    "initialize",
    "_vendor/ask",
    "nope",
]

TEMPLATES: dict[str, dict[str, Any]] = {
    "session/request_permission": {
        "sessionId": SESSION,
        "title": "Allow?",
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
        "subject": {"type": "tool_call", "toolCall": {"toolCallId": "t1", "title": "Edit"}},
    },
    "elicitation/create": {
        "sessionId": SESSION,
        "mode": "form",
        "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
    },
    "fs/read_text_file": {"sessionId": SESSION, "path": "/etc/passwd"},
    "fs/write_text_file": {"sessionId": SESSION, "path": "/tmp/x", "content": "x"},
    "terminal/create": {"sessionId": SESSION, "command": "/bin/sh", "args": ["-c", "id"]},
    "terminal/output": {"sessionId": SESSION, "terminalId": "term1"},
}

ids = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.integers(min_value=2**64, max_value=2**70),  # past 64 bits: orjson refuses them
    st.text(max_size=8),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=1),
)
session_ids = st.one_of(
    st.just(SESSION),
    st.just(SESSION),
    st.just(SESSION),
    st.sampled_from(["sess-0000000000000000", "", "s-1", "*"]),
    st.none(),
    st.integers(),
    st.lists(st.just(SESSION), max_size=2),
)
deep = st.integers(min_value=30, max_value=1100).map(lambda n: f"<deep:{n}>")
huge = st.integers(min_value=1024, max_value=64 * 1024).map(lambda n: f"<huge:{n}>")
weird = st.one_of(
    json_values, json_values, deep, huge, st.sampled_from(["\x00", "\u202e", "\u2028"])
)


def mutate(draw: st.DrawFn, obj: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """Zero to three mutations of ``obj``: a key dropped, retyped or added."""
    obj = json.loads(json.dumps(obj))
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["drop", "retype", "add"]))
        if action == "drop" and obj:
            obj.pop(draw(st.sampled_from(sorted(obj))))
        elif action == "retype" and obj:
            obj[draw(st.sampled_from(sorted(obj)))] = draw(weird)
        else:
            obj[draw(st.sampled_from([*keys, "_meta", "extra"]))] = draw(weird)
    return obj


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    """A ``session/update`` notification: a valid v2 update, often mutated or renamed."""
    update: Any = draw(v2_updates())
    if draw(st.integers(0, 3)) == 0:
        update["sessionUpdate"] = draw(st.sampled_from(VARIANTS))
    update = mutate(draw, update, sorted(update))
    if draw(st.integers(0, 20)) == 0:
        update = draw(weird)
    params: dict[str, Any] = {"sessionId": draw(session_ids), "update": update}
    if draw(st.integers(0, 10)) == 0:
        params = mutate(draw, params, ["sessionId", "update"])
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A request of the agent to the client, its params mutated, its id of any type."""
    method = draw(st.sampled_from(AGENT_REQUESTS))
    template = TEMPLATES.get(method, {"sessionId": SESSION})
    if method == "elicitation/create" and draw(st.booleans()):
        template = {"sessionId": SESSION, "mode": "url", "elicitationId": "e1", "url": "https://x"}
    params = mutate(draw, template, sorted(template))
    if method == "session/request_permission" and draw(st.booleans()):
        options = draw(st.lists(weird, max_size=3))
        params["options"] = options
    return {"jsonrpc": "2.0", "id": draw(ids), "method": method, "params": params}


@st.composite
def notifications(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(
        st.sampled_from(
            [
                "$/cancel_request",
                "elicitation/complete",
                "_vendor/notice",
                "_hub/anything",
                "session/cancel",
                "unknown/thing",
            ]
        )
    )
    params: dict[str, Any] = {
        "sessionId": draw(session_ids),
        "requestId": draw(ids),
        "elicitationId": draw(st.one_of(st.just("e1"), ids)),
    }
    return {"jsonrpc": "2.0", "method": method, "params": mutate(draw, params, sorted(params))}


answers = st.builds(
    lambda i, body: {"jsonrpc": "2.0", "id": i, **body},
    ids,
    st.one_of(
        st.builds(lambda v: {"result": v}, weird),
        st.builds(lambda v: {"error": v}, weird),
        st.builds(lambda c: {"error": {"code": c, "message": "no"}}, st.integers()),
        st.just({"result": {}, "error": {"code": 1, "message": "both"}}),
    ),
)


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    """A message with its envelope broken (version, method, params, id)."""
    message: dict[str, Any] = draw(st.one_of(updates(), requests(), notifications()))
    return mutate(draw, message, ["jsonrpc", "id", "method", "params", "result", "error"])


messages = st.one_of(updates(), updates(), updates(), requests(), notifications(), answers)

RAW = [
    b"[",
    b"{}",
    b"[]",
    b"null",
    b"1e999",
    b'"\\ud800"',
    b'{"jsonrpc":"2.0"',
    b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"@SESSION@","update":'
    b'{"sessionUpdate":"agent_message_chunk","messageId":"m1","content":{"type":"text",'
    b'"text":"\xff\xfe invalid utf-8"}}}}',
    b"\xc3\x28 \xa0\xa1 \xf0\x28\x8c\xbc",
    b"Starting agent... (a log line on stdout)",
    b"\x00\x01\x02",
]

common_lines: st.SearchStrategy[bytes] = st.one_of(
    messages.map(lambda m: _encode(m)),
    messages.map(lambda m: _encode(m)),
    messages.map(lambda m: _encode(m)),
    envelopes().map(lambda m: _encode(m)),
    st.lists(messages, min_size=1, max_size=3).map(lambda m: _encode(m)),
    st.sampled_from(RAW),
    st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\n", b" ")),
)
overlong = st.integers(0, 200).map(lambda n: b'{"pad":"' + b"x" * (MAX_LINE + n) + b'"}')
# One line in a hundred is over the limit: enough to cross it often, cheap to write.
lines = st.integers(0, 99).flatmap(lambda n: overlong if n == 0 else common_lines)

_MARKER = re.compile(r'"<(deep|huge):([0-9]+)>"')


def _expand(match: re.Match[str]) -> str:
    n = int(match.group(2))
    if match.group(1) == "deep":
        return "[" * n + "]" * n  # orjson reads 1,024 levels and writes only 254
    return '"' + "y" * n + '"'


def _encode(message: Any) -> bytes:
    """One line of JSON text (the stdlib encoder writes integers past 64 bits, which orjson
    refuses), with the ``<deep:N>`` and ``<huge:N>`` markers expanded."""
    return _MARKER.sub(_expand, json.dumps(message, ensure_ascii=False)).encode(
        "utf-8", "surrogatepass"
    )


def corpus(size: int, seed: int) -> list[bytes]:
    """``size`` lines drawn from ``lines`` (hypothesis as a generator, reproducible by seed)."""
    out: list[bytes] = []

    @settings(
        max_examples=size,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.randoms(use_true_random=False), lines)
    def draw(_: random.Random, line: bytes) -> None:
        out.append(line)

    random.seed(seed)
    draw()
    return out[:size]


# -- the test -------------------------------------------------------------------------------


def contiguous(seqs: list[int]) -> bool:
    """No gap, no reordering (a v1 client gets several updates with one seq when one event
    renders to several v1 updates)."""
    events = [s for i, s in enumerate(seqs) if i == 0 or s != seqs[i - 1]]
    return bool(events) and events == list(range(events[0], events[0] + len(events)))


def ended_after(client: AcpClient, session_id: str, marker: str) -> bool:
    """The turn is over: the agent said ``marker`` and then went idle."""
    seen = False
    for params in client.session_updates(session_id):
        update = params["update"]
        content = update.get("content")
        if isinstance(content, dict) and content.get("text") == marker:
            seen = True
        elif (
            seen and update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"
        ):
            return True
    return False


def more_than(items: list[Any], count: int) -> bool:
    return len(items) > count


async def answer_everything(client: AcpClient) -> None:
    """Answer every request the hub sends ``client``: a permission with its first option,
    an elicitation with ``decline`` (so nothing the agent asks is left waiting)."""
    answered = 0
    while True:
        await client.wait_for(partial(more_than, client.requests, answered), timeout=3600)
        for request in client.requests[answered:]:
            params = request.get("params") or {}
            if request["method"] == "session/request_permission":
                option = params["options"][0]["optionId"]
                result: Any = {"outcome": {"outcome": "selected", "optionId": option}}
            else:
                result = {"action": "decline"}
            await client.answer(request["id"], result)
        answered = len(client.requests)


async def until(client: AcpClient, predicate: Callable[[], bool]) -> None:
    await client.wait_for(predicate, timeout=WAIT)


def differences(seen: dict[str, Any], hub: dict[str, Any]) -> str:
    """Where a client's fold and the hub's state differ (for the failure message)."""
    keys = sorted(k for k in {*seen, *hub} if seen.get(k) != hub.get(k))
    return "; ".join(f"{k}: {seen.get(k)!r:.600} != {hub.get(k)!r:.600}" for k in keys)


def hub_state(hub: HubHandle, session_id: str) -> dict[str, Any]:
    registry = hub.app.registry
    assert registry is not None
    return registry.sessions[session_id].state.snapshot()


def last_seq(hub: HubHandle, session_id: str) -> int:
    registry = hub.app.registry
    assert registry is not None
    session = registry.sessions[session_id]
    return session.log.last_seq if session.settled else -1


@pytest.mark.timeout(3 * WAIT)
@pytest.mark.parametrize("protocol", [2, 1])
async def test_a_lying_agent_cannot_hurt_the_hub(
    protocol: int, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING)
    # v1 agents go through the translator: half the corpus covers it.
    size = MESSAGES if protocol == 2 else MESSAGES // 2
    lines = corpus(size, SEED)
    assert len(lines) == size
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    agents = [scripted_agent("liar", protocol), scripted_agent("healthy", 2)]
    async with (
        running_hub(agents, Settings(max_line_bytes=MAX_LINE)) as hub,
        acp_client(hub.url) as driver,
        acp_client(hub.url, 1, events=True) as v1,
        acp_client(hub.url) as other,
        acp_client(hub.url) as watcher,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(answer_everything, driver)
        sid = await driver.new_session("liar")
        await v1.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        calm = await other.new_session("healthy")
        await watcher.call("session/resume", {"sessionId": calm, "cwd": "/tmp"})

        await driver.prompt(sid, f"replay-lines {path}\nsay {DONE}")
        await other.prompt(calm, "stream 2000 16\nsay calm")
        await until(driver, lambda: ended_after(driver, sid, DONE))
        await until(watcher, lambda: watcher.idle_count(calm) >= 1)

        # Not wedged: the same session takes another prompt and finishes its turn.
        await driver.prompt(sid, f"say {AFTER}")
        await until(driver, lambda: ended_after(driver, sid, AFTER))
        for client in (driver, v1):
            await until(
                client,
                lambda client=client: client.last_seq(sid) == last_seq(hub, sid),  # type: ignore[misc]
            )
            assert contiguous(client.seqs(sid)), f"gap (seed {SEED})"
        state = hub_state(hub, sid)
        live = driver.fold(sid).snapshot()
        assert live == state, f"seed {SEED}: {differences(live, state)}"
        async with acp_client(hub.url) as late:
            await late.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}
            )
            folded = SessionState()
            for params in late.session_updates(sid):
                if params["_meta"]["acp-hub"].get("replay"):  # not its own arrival after it
                    folded.apply(params["update"])
            replayed = folded.snapshot()
            assert replayed == state, f"seed {SEED}: {differences(replayed, state)}"

        # The other agent's session saw no gap, and its agent still serves new sessions.
        assert contiguous(watcher.seqs(calm)), f"gap (seed {SEED})"
        fresh = await other.new_session("healthy")
        await other.prompt(fresh, "say still alive")
        await until(other, lambda: other.idle_count(fresh) >= 1)
        tg.cancel_scope.cancel()

    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, (
        f"{len(bad)} error or traceback log records for what the agent sent (seed {SEED}); "
        f"first: {bad[0].getMessage()}"
    )
