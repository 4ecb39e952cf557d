"""The conformance scenario (``tests/interop/matrix.py``) for each kind of client.

Every runner returns ``{method: outcome}``: ``pass``, ``n/a``, or what went wrong. A runner
never raises for a failing step: the step's cell says so and the scenario goes on where it
can.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
from acp import connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.http.client import create_http_stream
from acp.schema import (
    AcceptElicitationResponse,
    ClientCapabilities,
    CreateElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationMode,
)
from acp.ws.client import create_websocket_stream

from tests.bridge.harness import EditorClient, spawn_bridge
from tests.interop.matrix import CLIENTS, NA, PASS, PY_SDK, TS_SDK
from tests.peers import paths
from tests.server.harness import AcpClient, HubHandle, acp_client, running_hub, scripted_agent
from tests.support import require_binary

TURN = "permission\nelicit force\nsay matrix done"
SLOW = "say started\nsleep 15000\nsay not cancelled"
STEP_TIMEOUT = 20.0

Outcomes = dict[str, str]


async def _cell(outcomes: Outcomes, method: str, step: Callable[[], Awaitable[str]]) -> None:
    """Run one step; its outcome (``pass``, ``n/a`` or a short reason) goes in the cell."""
    try:
        with anyio.fail_after(STEP_TIMEOUT):
            outcomes[method] = await step()
    except TimeoutError:
        outcomes[method] = f"no answer within {STEP_TIMEOUT:.0f} s"
    except Exception as exc:  # a failing step is a cell, not the end of the scenario
        outcomes[method] = f"{type(exc).__name__}: {str(exc)[:160]}"


def _check(ok: bool, detail: str) -> str:
    return PASS if ok else detail


# -- raw clients ------------------------------------------------------------------------------


def _texts(client: AcpClient, session_id: str) -> str:
    """What the agent said, as chunks (live, v1 replay) or whole messages (v2 replay)."""
    said = []
    for params in client.session_updates(session_id):
        update = params["update"]
        content = update.get("content")
        if update.get("sessionUpdate") == "agent_message_chunk" and isinstance(content, dict):
            said.append(str(content.get("text")))
        elif update.get("sessionUpdate") == "agent_message" and isinstance(content, list):
            said.extend(str(block.get("text")) for block in content if isinstance(block, dict))
    return "".join(said)


async def _answer_requests(client: AcpClient) -> None:
    """Answer every permission request (allow) and elicitation (accept) the client gets."""
    answered: set[Any] = set()
    while True:
        for request in list(client.requests):
            if request["id"] in answered:
                continue
            answered.add(request["id"])
            if request["method"] == "session/request_permission":
                option = next(
                    o for o in request["params"]["options"] if o["kind"].startswith("allow")
                )
                await client.answer(
                    request["id"],
                    {"outcome": {"outcome": "selected", "optionId": option["optionId"]}},
                )
            elif request["method"] == "elicitation/create":
                await client.answer(request["id"], {"action": "accept", "content": {"name": "m"}})
        await client.wait_for(lambda: any(r["id"] not in answered for r in client.requests), 3600)


async def run_raw(hub: HubHandle, version: int, cwd: str) -> Outcomes:
    out: Outcomes = {}
    async with acp_client(hub.url, version) as client, anyio.create_task_group() as tg:
        tg.start_soon(_answer_requests, client)
        out["initialize"] = _check(
            client.init_result.get("protocolVersion") == version, str(client.init_result)[:100]
        )
        sid = await client.new_session(cwd=cwd)
        out["session/new"] = PASS

        async def listed() -> str:
            result = await client.call("session/list", {"cwd": cwd})
            return _check(any(s["sessionId"] == sid for s in result["sessions"]), str(result))

        await _cell(out, "session/list", listed)

        async def prompt() -> str:
            answer = await client.call(
                "session/prompt", {"sessionId": sid, "prompt": _blocks(TURN)}
            )
            if version < 2:
                ok = answer.get("stopReason") == "end_turn"
            else:
                await client.wait_for(lambda: client.idle_count(sid) >= 1)
                ok = "messageId" in answer
            said = _texts(client, sid)
            out["session/request_permission"] = _check(
                "permission: selected allow" in said, f"the agent said {said[:80]!r}"
            )
            out["elicitation/create"] = _check("elicit: accept" in said, f"the agent said {said!r}")
            return _check(ok and "matrix done" in said, f"answer {answer}, said {said[:80]!r}")

        await _cell(out, "session/prompt", prompt)

        async def config() -> str:
            result = await client.call(
                "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "code"}
            )
            return _check("configOptions" in result, str(result)[:100])

        await _cell(out, "session/set_config_option", config)

        async def mode() -> str:
            if version >= 2:
                return NA
            await client.call("session/set_mode", {"sessionId": sid, "modeId": "ask"})
            return PASS

        await _cell(out, "session/set_mode", mode)

        async def cancel() -> str:
            before = client.idle_count(sid)
            first = await client.start(
                "session/prompt", {"sessionId": sid, "prompt": _blocks(SLOW)}
            )
            await client.wait_for(lambda: "started" in _texts(client, sid))
            await client.notify("session/cancel", {"sessionId": sid})
            answer = await client.result(first)
            if version < 2:
                return _check(answer.get("stopReason") == "cancelled", str(answer))
            await client.wait_for(lambda: client.idle_count(sid) > before)
            stops = [
                p["update"].get("stopReason")
                for p in client.session_updates(sid)
                if p["update"].get("sessionUpdate") == "state_update"
            ]
            return _check(stops[-1] == "cancelled", str(stops[-3:]))

        await _cell(out, "session/cancel", cancel)

        async def cancel_request() -> str:
            if version >= 2:
                # A v2 prompt is answered once accepted or queued: the request in flight is an
                # extension request the agent holds until the client withdraws it.
                held = await client.start("_acme/wait", {"sessionId": sid})
                await client.wait_for(lambda: "held _acme/wait" in _texts(client, sid))
                await client.notify("$/cancel_request", {"requestId": held})
                withdrawn = await client.response(held)
                # The hub passed the cancel on: the agent says it let the request go.
                await client.wait_for(lambda: "withdrawn _acme/wait" in _texts(client, sid))
                return _check(withdrawn.get("error", {}).get("code") == -32800, str(withdrawn))
            busy = await client.start("session/prompt", {"sessionId": sid, "prompt": _blocks(SLOW)})
            queued = await client.start(
                "session/prompt", {"sessionId": sid, "prompt": _blocks("x")}
            )
            await client.wait_for(lambda: _texts(client, sid).count("started") >= 2)
            await client.notify("$/cancel_request", {"requestId": queued})
            withdrawn = await client.response(queued)
            await client.notify("session/cancel", {"sessionId": sid})
            await client.response(busy)
            return _check(withdrawn.get("error", {}).get("code") == -32800, str(withdrawn))

        await _cell(out, "$/cancel_request", cancel_request)

        async def extension() -> str:
            result = await client.call("_acme/echo", {"sessionId": sid, "n": 1})
            return _check(result.get("echo") == {"n": 1}, str(result))

        await _cell(out, "_acme/echo (extension)", extension)

        async with acp_client(hub.url, version) as second:
            await _second_raw(out, second, sid, version, cwd)

        async def close() -> str:
            await client.call("session/close", {"sessionId": sid})
            return PASS

        await _cell(out, "session/close", close)

        async def delete() -> str:
            other = await client.new_session(cwd=cwd)
            await client.call("session/delete", {"sessionId": other})
            return PASS

        await _cell(out, "session/delete", delete)
        tg.cancel_scope.cancel()
    return out


async def _second_raw(out: Outcomes, second: AcpClient, sid: str, version: int, cwd: str) -> None:
    async def load() -> str:
        await second.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        return _check("matrix done" in _texts(second, sid), _texts(second, sid)[:80])

    await _cell(out, "session/load", load)
    await second.call("session/detach", {"sessionId": sid})
    second.updates.clear()

    async def resume() -> str:
        params: dict[str, Any] = {"sessionId": sid, "cwd": cwd, "mcpServers": []}
        if version >= 2:
            params["replayFrom"] = {"type": "start"}
        else:
            params["_meta"] = {"acp-hub": {"replay": "start"}}
        await second.call("session/resume", params)
        return _check("matrix done" in _texts(second, sid), _texts(second, sid)[:80])

    await _cell(out, "session/resume", resume)
    await second.call("session/detach", {"sessionId": sid})
    second.updates.clear()

    async def attach() -> str:
        result = await second.call(
            "session/attach", {"sessionId": sid, "role": "observer", "historyPolicy": "full"}
        )
        return _check(
            result.get("role") == "viewer" and "matrix done" in _texts(second, sid), str(result)
        )

    await _cell(out, "session/attach", attach)


def _blocks(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


# -- the Python SDK ---------------------------------------------------------------------------


@dataclass(eq=False)
class MatrixEditor(EditorClient):
    """The SDK editor of the matrix: allows permissions, accepts elicitations."""

    elicited: list[str] = field(default_factory=list)

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        self.elicited.append(message)
        return AcceptElicitationResponse(action="accept", content={"name": "m"})


CAPS = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))


@asynccontextmanager
async def sdk_client(
    transport: str, hub: HubHandle, logs: Path, editor: EditorClient, *, unstable: bool = False
) -> AsyncIterator[ClientSideConnection]:
    """The Python SDK's client over ``transport``: WebSocket (``ws``), Streamable HTTP
    (``http``), or stdio through ``acp-hub bridge`` (``bridge``, its logs in ``logs``).
    ``unstable``: the SDK's unstable protocol, which elicitations are in (the editor opts in)."""
    if transport == "bridge":
        async with spawn_bridge(hub.url, logs, editor=editor, unstable=unstable) as run:
            yield run.conn
        return
    stream = (
        create_http_stream(hub.http_acp)
        if transport == "http"
        else await create_websocket_stream(hub.url)
    )
    conn = connect_to_agent(editor, stream, use_unstable_protocol=unstable)
    try:
        yield conn
    finally:
        await conn.close()


async def run_python_sdk(hub: HubHandle, transport: str, cwd: str, logs: Path) -> Outcomes:
    out: Outcomes = {}
    editor = MatrixEditor()
    async with sdk_client(transport, hub, logs, editor, unstable=True) as conn:
        init = await conn.initialize(protocol_version=1, client_capabilities=CAPS)
        out["initialize"] = _check(init.protocol_version == 1, str(init)[:100])
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        sid = session.session_id
        out["session/new"] = PASS

        async def listed() -> str:
            result = await conn.list_sessions(cwd=cwd)
            return _check(any(s.session_id == sid for s in result.sessions), str(result)[:100])

        await _cell(out, "session/list", listed)

        async def prompt() -> str:
            done = await conn.prompt(session_id=sid, prompt=[text_block(TURN)])
            said = "".join(editor.texts())
            out["session/request_permission"] = _check(
                "permission: selected allow" in said, said[:80]
            )
            out["elicitation/create"] = _check("elicit: accept" in said, said[:80])
            return _check(done.stop_reason == "end_turn" and "matrix done" in said, said[:80])

        await _cell(out, "session/prompt", prompt)

        async def config() -> str:
            result = await conn.set_config_option(config_id="mode", session_id=sid, value="code")
            return _check(bool(result and result.config_options), str(result)[:100])

        await _cell(out, "session/set_config_option", config)

        async def mode() -> str:
            await conn.set_session_mode(mode_id="ask", session_id=sid)
            return PASS

        await _cell(out, "session/set_mode", mode)

        async def cancel() -> str:
            async with anyio.create_task_group() as tg:
                answer: list[Any] = []

                async def slow() -> None:
                    answer.append(await conn.prompt(session_id=sid, prompt=[text_block(SLOW)]))

                tg.start_soon(slow)
                await editor.wait_for(lambda: "started" in "".join(editor.texts()))
                await conn.cancel(session_id=sid)
            return _check(answer[0].stop_reason == "cancelled", str(answer))

        await _cell(out, "session/cancel", cancel)
        out["$/cancel_request"] = "no API"

        async def extension() -> str:
            result = await conn.ext_method("acme/echo", {"sessionId": sid, "n": 1})
            return _check(result.get("echo") == {"n": 1}, str(result))

        await _cell(out, "_acme/echo (extension)", extension)

        for method in ("session/load", "session/resume"):
            second = MatrixEditor()
            async with sdk_client(transport, hub, logs, second, unstable=True) as other:
                await other.initialize(protocol_version=1, client_capabilities=CAPS)

                async def take(
                    other: ClientSideConnection = other,
                    method: str = method,
                    shown: MatrixEditor = second,
                ) -> str:
                    if method == "session/load":
                        await other.load_session(cwd=cwd, session_id=sid)
                    else:
                        meta: dict[str, Any] = {"acp-hub": {"replay": "start"}}
                        await other.resume_session(cwd=cwd, session_id=sid, **meta)
                    await shown.wait_for(lambda: "matrix done" in "".join(shown.texts()))
                    return PASS

                await _cell(out, method, take)
        out["session/attach"] = "no API"

        async def close() -> str:
            await conn.close_session(session_id=sid)
            return PASS

        await _cell(out, "session/close", close)
        out["session/delete"] = "no API"
    return out


# -- the TypeScript SDK -----------------------------------------------------------------------


async def run_typescript_sdk(hub: HubHandle, transport: str, version: int, cwd: str) -> Outcomes:
    node = require_binary("node")
    paths.ts_agent_js()  # skips (or fails in CI) when the peers are not installed
    script = paths.ts_ws_client_module_dir() / "matrix_client.mjs"
    url = hub.url if transport == "ws" else hub.http_acp
    with anyio.fail_after(180):
        done = await anyio.run_process(
            [node, str(script), url, transport, str(version), cwd],
            check=False,
            cwd=str(paths.ts_ws_client_module_dir()),
        )
    lines = done.stdout.decode().strip().splitlines()
    if not lines:
        return {"initialize": f"no output (rc {done.returncode}): {done.stderr.decode()[-300:]}"}
    cells = orjson.loads(lines[-1])
    return {str(k): str(v) for k, v in cells.items()}


# -- all of them ------------------------------------------------------------------------------


async def run_matrix(logs: Path | None = None) -> dict[str, Outcomes]:
    """Every client of ``CLIENTS`` through the scenario, against one hub."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        logs = logs or base / "logs"
        results: dict[str, Outcomes] = {}
        async with running_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as hub:
            runners: dict[str, Callable[[str], Awaitable[Outcomes]]] = {
                CLIENTS[0]: lambda cwd: run_raw(hub, 1, cwd),
                CLIENTS[1]: lambda cwd: run_raw(hub, 2, cwd),
                f"{PY_SDK} WebSocket": lambda cwd: run_python_sdk(hub, "ws", cwd, logs),
                f"{PY_SDK} Streamable HTTP": lambda cwd: run_python_sdk(hub, "http", cwd, logs),
                f"{PY_SDK} stdio via acp-hub bridge": lambda cwd: run_python_sdk(
                    hub, "bridge", cwd, logs
                ),
                f"{TS_SDK} WebSocket v1": lambda cwd: run_typescript_sdk(hub, "ws", 1, cwd),
                f"{TS_SDK} WebSocket v2": lambda cwd: run_typescript_sdk(hub, "ws", 2, cwd),
                f"{TS_SDK} Streamable HTTP v1": lambda cwd: run_typescript_sdk(hub, "http", 1, cwd),
                f"{TS_SDK} Streamable HTTP v2": lambda cwd: run_typescript_sdk(hub, "http", 2, cwd),
            }

            async def one(client: str) -> None:
                cwd = base / f"cwd-{CLIENTS.index(client)}"
                cwd.mkdir()
                results[client] = await runners[client](str(cwd))

            async with anyio.create_task_group() as tg:
                for client in CLIENTS:
                    tg.start_soon(one, client)
        return results


__all__ = ["run_matrix", "run_python_sdk", "run_raw", "run_typescript_sdk", "sdk_client"]
