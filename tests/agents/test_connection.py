"""The JSON-RPC connection to an agent process: id spaces, withdrawals, answers per JSON-RPC."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest

from hub.agents.connection import BATCH_LINES, Connection, DispatchBatch
from hub.agents.errors import AgentError, agent_unavailable
from hub.agents.process import AgentProcess
from hub.agents.spec import AgentSpec
from hub.mistakes import BURST
from hub.protocol.errors import METHOD_NOT_FOUND, REQUEST_CANCELLED, method_not_found
from hub.protocol.jsonrpc import DEFAULT_MAX_DEPTH
from tests.agents.harness import SCRIPTED_AGENT

# An agent that, once initialized, writes the lines of the file named by argv[1] to stdout,
# and echoes every line it reads to stderr as `got <line>`.
ECHO_AGENT = r"""
import json, sys
lines = open(sys.argv[1]).read().splitlines()
for raw in sys.stdin:
    sys.stderr.write("got " + raw.strip() + "\n"); sys.stderr.flush()
    msg = json.loads(raw)
    if msg.get("method") == "initialize":
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result":
                         {"protocolVersion": 2, "info": {"name": "echo", "version": "1"},
                          "capabilities": {}}}) + "\n")
        sys.stdout.write("".join(line + "\n" for line in lines)); sys.stdout.flush()
"""


@asynccontextmanager
async def connected(
    spec: AgentSpec,
    on_request: Any = None,
    notifications: list[tuple[str, dict[str, Any]]] | None = None,
    dispatch_batch: DispatchBatch = nullcontext,
) -> AsyncIterator[tuple[AgentProcess, Connection]]:
    async def refuse(method: str, params: dict[str, Any]) -> Any:
        raise AgentError(method_not_found(method))

    seen = notifications if notifications is not None else []
    process = await AgentProcess.spawn(spec)
    try:
        async with anyio.create_task_group() as tg:
            conn = Connection(
                spec.name,
                process.stdin,
                process.stdout,
                tg,
                on_request=on_request or refuse,
                on_notification=lambda m, p: seen.append((m, p)),
                dispatch_batch=dispatch_batch,
            )
            tg.start_soon(conn.run)
            tg.start_soon(process.pump_stderr)
            yield process, conn
            tg.cancel_scope.cancel()
    finally:
        await process.stop("test over")
        await process.aclose()


async def wait_stderr(process: AgentProcess, needle: str, count: int = 1) -> None:
    with anyio.fail_after(10):
        while process.stderr_tail().count(needle) < count:
            await process.next_stderr_line()


class _Seen(logging.Handler):
    """Sets ``event`` when a log record contains ``needle``."""

    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle = needle
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.event.set()


async def test_cancelled_request_is_withdrawn_and_its_late_answer_ignored(
    tmp_path: Path,
) -> None:
    spec = AgentSpec("scripted", sys.executable, (str(SCRIPTED_AGENT), "--protocol", "1"))
    late = _Seen("ignored an answer to id 2")
    logger = logging.getLogger("hub.agents")
    logger.addHandler(late)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        async with connected(spec) as (_process, conn):
            await conn.request("initialize", {"protocolVersion": 1})
            new = await conn.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            prompt = {
                "sessionId": new["sessionId"],
                "prompt": [{"type": "text", "text": "sleep 20000"}],
            }
            with anyio.move_on_after(0.5) as scope:
                await conn.request("session/prompt", prompt)  # id 2
            assert scope.cancelled_caught
            assert conn.pending == 0  # forgotten locally at once
            # The agent got $/cancel_request for id 2 and answered it, long before the
            # 20 s: the answer arrived and was ignored.
            with anyio.fail_after(10):
                await late.event.wait()
            prompt["prompt"] = [{"type": "text", "text": "say ok"}]
            assert await conn.request("session/prompt", prompt) == {"stopReason": "end_turn"}
    finally:
        logger.removeHandler(late)
        logger.setLevel(level)


async def _batches_of(tmp_path: Path, count: int) -> tuple[list[int], list[tuple[int, int]]]:
    """``count`` notifications written by the echo agent in one write: the ``n`` of each as
    dispatched, and each ``dispatch_batch()`` as ``(first, end)`` indexes into them."""
    script = tmp_path / "echo_agent.py"
    script.write_text(ECHO_AGENT)
    lines = tmp_path / "lines.txt"
    lines.write_text(
        "\n".join(
            json.dumps({"jsonrpc": "2.0", "method": "note", "params": {"n": n}})
            for n in range(count)
        )
    )
    seen: list[tuple[str, dict[str, Any]]] = []
    batches: list[tuple[int, int]] = []

    @contextmanager
    def batch() -> Iterator[None]:
        first = len(seen)
        try:
            yield
        finally:
            batches.append((first, len(seen)))

    spec = AgentSpec("echo", sys.executable, (str(script), str(lines)))
    async with connected(spec, notifications=seen, dispatch_batch=batch) as (_process, conn):
        await conn.request("initialize", {"protocolVersion": 2})
        with anyio.fail_after(10):
            while len(seen) < count:  # noqa: ASYNC110 - the recorder is a plain list
                await anyio.sleep(0.01)
    return [p["n"] for _, p in seen], batches


async def test_lines_read_together_are_dispatched_in_bounded_batches(tmp_path: Path) -> None:
    # 150 notifications in one write: every one is dispatched inside a batch, in order, and
    # no batch holds more than BATCH_LINES of them.
    count = 150
    numbers, batches = await _batches_of(tmp_path, count)
    assert numbers == list(range(count))
    # Batches follow one another and together cover every line: none came outside one.
    covered = [i for first, end in batches for i in range(first, end)]
    assert covered == list(range(count))
    assert max(end - first for first, end in batches) == BATCH_LINES


async def test_a_few_lines_read_together_are_dispatched_one_per_batch(tmp_path: Path) -> None:
    # Ten notifications in one write (under PIPE_BUF, about 60 bytes each: one atomic write,
    # read in one go): a live stream, each line in a batch of its own, so that no line's
    # writes wait for the others'.
    count = 10
    assert count * 64 < 4096
    assert count <= BATCH_LINES
    numbers, batches = await _batches_of(tmp_path, count)
    assert numbers == list(range(count))
    assert [(first, end) for first, end in batches if end > first] == [
        (n, n + 1) for n in range(count)
    ]


async def test_agent_ids_from_zero_withdrawal_and_unknown_methods(tmp_path: Path) -> None:
    script = tmp_path / "echo_agent.py"
    script.write_text(ECHO_AGENT)
    lines = tmp_path / "lines.txt"
    lines.write_text(
        "\n".join(
            json.dumps(m)
            for m in [
                # Its own ids start at 0, like ours: both are in flight at once.
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "session/request_permission",
                    "params": {"sessionId": "s"},
                },
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "fs/read_text_file",
                    "params": {"sessionId": "s", "path": "/etc/passwd"},
                },
                {"jsonrpc": "2.0", "method": "_vendor/hello", "params": {"x": 1}},
                {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}},
            ]
        )
    )
    spec = AgentSpec("echo", sys.executable, (str(script), str(lines)))
    started = anyio.Event()
    cancelled = anyio.Event()
    notes: list[tuple[str, dict[str, Any]]] = []

    async def on_request(method: str, params: dict[str, Any]) -> Any:
        if method == "session/request_permission":
            started.set()
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.set()
        raise AgentError(method_not_found(method))

    async with connected(spec, on_request, notes) as (process, conn):
        await conn.request("initialize", {"protocolVersion": 2})
        with anyio.fail_after(10):
            await started.wait()
            await cancelled.wait()
        await wait_stderr(process, f'"id":0,"error":{{"code":{REQUEST_CANCELLED}')
        await wait_stderr(process, f'"id":1,"error":{{"code":{METHOD_NOT_FOUND}')
        assert notes == [("_vendor/hello", {"x": 1})]


async def test_garbage_gets_parse_error_with_null_id(tmp_path: Path) -> None:
    script = tmp_path / "echo_agent.py"
    script.write_text(ECHO_AGENT)
    lines = tmp_path / "lines.txt"
    lines.write_text('not json at all\n{"jsonrpc": "2.0", "id": 7}\n[1, 2]\n')
    spec = AgentSpec("echo", sys.executable, (str(script), str(lines)))
    async with connected(spec) as (process, conn):
        await conn.request("initialize", {"protocolVersion": 2})
        await wait_stderr(process, '"id":null,"error":{"code":-32700')
        await wait_stderr(process, '"id":7,"error":{"code":-32600')
        # The array is refused too: batches are a v2 feature, and stdio frames are single.
        await wait_stderr(process, '"id":null,"error":{"code":-32600', count=1)


class _Notes(list[tuple[str, dict[str, Any]]]):
    """The notifications seen, with an event set by the first."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = anyio.Event()

    def append(self, item: tuple[str, dict[str, Any]]) -> None:
        super().append(item)
        self.arrived.set()


async def test_an_agent_that_floods_garbage_does_not_flood_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Every garbage line is refused, but the log gets the burst of lines and then one line
    # that says how many were left out, not one line per garbage line.
    script = tmp_path / "echo_agent.py"
    script.write_text(ECHO_AGENT)
    lines = tmp_path / "lines.txt"
    done = '{"jsonrpc": "2.0", "method": "_vendor/done"}\n'
    lines.write_text("".join(f"garbage {i}\n" for i in range(500)) + done)
    spec = AgentSpec("echo", sys.executable, (str(script), str(lines)))
    caplog.set_level(logging.INFO, logger="hub.agents")
    notes = _Notes()
    async with connected(spec, notifications=notes) as (_process, conn):
        await conn.request("initialize", {"protocolVersion": 2})
        with anyio.fail_after(10):
            await notes.arrived.wait()  # lines are dispatched in order: the garbage came first
        faults = [r for r in caplog.records if "unparseable line" in r.getMessage()]
        assert 0 < len(faults) <= BURST + 1
        assert all(r.levelno == logging.WARNING for r in faults)


async def test_requests_fail_once_closed(tmp_path: Path) -> None:
    spec = AgentSpec("scripted", sys.executable, (str(SCRIPTED_AGENT),))
    async with connected(spec) as (_process, conn):
        await conn.request("initialize", {"protocolVersion": 2})
        conn.close(agent_unavailable("scripted", "test").error)
        with pytest.raises(AgentError) as closed:
            await conn.request("session/list", {})
        assert "test" in closed.value.error.message


# An agent that answers every request of the hub with a result nested 300 levels deep, and
# after initialize sends a request and a notification nested as deep, then ones at the limit.
DEEP_AGENT = r"""
import json, sys
deep = "[" * 300 + "]" * 300
edge = "[" * 62 + "]" * 62  # inside params (level 2): the message is exactly 64 levels deep
for raw in sys.stdin:
    sys.stderr.write("got " + raw.strip() + "\n"); sys.stderr.flush()
    msg = json.loads(raw)
    if msg.get("method") == "initialize":
        out = [json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result":
                {"protocolVersion": 2, "info": {"name": "deep", "version": "1"},
                 "capabilities": {}}})]
        out.append('{"jsonrpc":"2.0","id":"d1","method":"_vendor/ask","params":{"v":' + deep + '}}')
        out.append('{"jsonrpc":"2.0","method":"_vendor/deep","params":{"v":' + deep + "}}")
        out.append('{"jsonrpc":"2.0","method":"_vendor/edge","params":{"v":' + edge + "}}")
        out.append('{"jsonrpc":"2.0","id":"e1","method":"_vendor/ask","params":{"v":' + edge + '}}')
    elif "id" in msg and "method" in msg:
        out = ['{"jsonrpc":"2.0","id":' + json.dumps(msg["id"]) + ',"result":' + deep + "}"]
    else:
        continue
    sys.stdout.write("".join(line + "\n" for line in out)); sys.stdout.flush()
"""


async def test_messages_nested_past_the_limit_are_refused_on_arrival(tmp_path: Path) -> None:
    # orjson reads 1,024 levels but writes 254: nothing nested past the limit gets in, and
    # an answer nested too deep fails the request instead of leaving it waiting.
    script = tmp_path / "deep_agent.py"
    script.write_text(DEEP_AGENT)
    spec = AgentSpec("deep", sys.executable, (str(script),))
    served: list[dict[str, Any]] = []
    notes: list[tuple[str, dict[str, Any]]] = []

    async def on_request(method: str, params: dict[str, Any]) -> Any:
        served.append(params)
        return {}

    async with connected(spec, on_request, notes) as (process, conn):
        await conn.request("initialize", {"protocolVersion": 2})
        await wait_stderr(process, '"id":"d1","error":{"code":-32602')
        await wait_stderr(process, '"id":"e1","result":{}')
        with pytest.raises(AgentError) as refused:
            await conn.request("session/list", {})
        assert refused.value.error.code == -32600
        assert f"nested more than {DEFAULT_MAX_DEPTH} levels" in str(refused.value.error.data)
    assert [method for method, _ in notes] == ["_vendor/edge"]
    assert len(served) == 1  # the request at the limit, not the one past it


BROKEN_ANSWER_AGENT = r"""
import json, sys
for raw in sys.stdin:
    sys.stderr.write("got " + raw.strip() + "\n"); sys.stderr.flush()
    msg = json.loads(raw)
    if msg.get("method") == "initialize":
        out = {"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 2}}
    elif msg.get("method") == "session/list":
        out = {"jsonrpc": "2.0", "id": msg["id"]}  # neither result nor error
    elif msg.get("method") == "session/new":
        out = {"id": msg["id"], "result": {"sessionId": "s"}}  # no "jsonrpc"
    else:
        continue
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
"""


async def test_a_broken_answer_fails_its_request_at_once(tmp_path: Path) -> None:
    # An answer with a valid id but no result or error (or no "jsonrpc") ends the request
    # it names as failed, with -32600, instead of leaving it waiting for the deadline.
    script = tmp_path / "broken_answer_agent.py"
    script.write_text(BROKEN_ANSWER_AGENT)
    spec = AgentSpec("broken", sys.executable, (str(script),))
    async with connected(spec) as (_process, conn):
        await conn.request("initialize", {"protocolVersion": 2})
        with anyio.fail_after(10):
            with pytest.raises(AgentError) as neither:
                await conn.request("session/list", {})
            with pytest.raises(AgentError) as unversioned:
                await conn.request("session/new", {"cwd": "/", "mcpServers": []})
        assert neither.value.error.code == -32600
        assert "exactly one of result and error" in str(neither.value.error.data)
        assert unversioned.value.error.code == -32600
        assert conn.pending == 0
