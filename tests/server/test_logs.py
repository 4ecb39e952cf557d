"""Log lines: the client they are about, no credentials, the text and JSON formats.

The client context is checked on a real hub with real WebSocket clients (the records caplog
captures, with the hub's filters on its handler); the JSON format end to end on
``acp-hub demo --log-format json``, uvicorn's own lines included.
"""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from websockets.sync.client import connect

from hub.server import logs
from tests.credentials import bearer, owner_token
from tests.hubproc import BANNER
from tests.server.harness import AcpClient, acp_client, running_hub, scripted_agent
from tests.support import ROOT

SECRET = "s3cr3t-VALUE.abc_123"


@pytest.fixture
def hub_filters(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """caplog with the filters the hub's own handler has, at INFO for the hub."""
    context, redact = logs.ClientContext(), logs.Redact()
    caplog.handler.addFilter(context)
    caplog.handler.addFilter(redact)
    caplog.set_level(logging.INFO, logger="hub")
    try:
        yield caplog
    finally:
        caplog.handler.removeFilter(context)
        caplog.handler.removeFilter(redact)


def _answered_with_an_error(client: AcpClient) -> Callable[[], bool]:
    return lambda: any(isinstance(f, dict) and "error" in f for f in client.frames)


def _connection_id(init_result: dict[str, Any]) -> str:
    return str(init_result["_meta"]["acp-hub"]["connectionId"])


@pytest.mark.anyio
async def test_every_line_about_a_client_names_its_connection_and_principal(
    hub_filters: pytest.LogCaptureFixture,
) -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url) as first,
        acp_client(hub.url) as second,
    ):
        ids = {_connection_id(first.init_result), _connection_id(second.init_result)}
        for client in (first, second):
            await client.ws.send("{not json")
            await client.wait_for(_answered_with_an_error(client))
    about: dict[str, list[logging.LogRecord]] = {id_: [] for id_ in ids}
    for record in hub_filters.records:
        named = [id_ for id_ in ids if id_ in record.getMessage()]
        if named:
            about[named[0]].append(record)
    for connection_id, records in about.items():
        messages = [r.getMessage() for r in records]
        assert any("connected from" in m for m in messages), messages
        assert any("invalid message" in m for m in messages), messages
        for record in records:
            assert getattr(record, "connection", None) == connection_id, record.getMessage()
            assert getattr(record, "principal", None) == "test-owner", record.getMessage()


def test_an_explicit_connection_wins_over_the_context(caplog: pytest.LogCaptureFixture) -> None:
    caplog.handler.addFilter(logs.ClientContext())
    caplog.set_level(logging.INFO, logger="hub.test")
    log = logging.getLogger("hub.test")
    with logs.client_context("c-own", "alice"):
        log.info("about myself")
        log.info("about another client", extra={"connection": "c-other"})
    log.info("about nobody")
    own, other, nobody = caplog.records
    assert (own.connection, own.principal) == ("c-own", "alice")  # type: ignore[attr-defined]
    assert (other.connection, other.principal) == ("c-other", None)  # type: ignore[attr-defined]
    assert (nobody.connection, nobody.principal) == (None, None)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        f"GET /s/abc?role=viewer&token={SECRET}&x=1",
        f"ws://127.0.0.1:8765/acp?TOKEN={SECRET}",
        f"Authorization: Bearer {SECRET}",
        f"authorization: bearer {SECRET}",
        f'params {{"token": "{SECRET}", "role": "driver"}}',
        f'{{"accessToken":"{SECRET}"}}',
        f"store redis://:{SECRET}@10.0.0.5:6379/0 unreachable",
        f"rediss://hub:{SECRET}@redis.internal/1",
    ],
)
def test_credentials_never_reach_the_log(hub_filters: pytest.LogCaptureFixture, text: str) -> None:
    log = logging.getLogger("hub.test")
    log.info("request: %s", text)
    try:
        raise ValueError(f"refused {text}")
    except ValueError:
        log.exception("! failed")
    assert SECRET not in hub_filters.text
    assert all(SECRET not in r.getMessage() for r in hub_filters.records)
    assert logs.REDACTED in hub_filters.records[0].getMessage()
    assert logs.REDACTED in hub_filters.text.split("! failed", 1)[1]  # the traceback too


def test_redaction_leaves_other_text_alone() -> None:
    text = "= c-1: session/prompt by driver (token count 12, tokens: 3)"
    assert logs.redact(text) == text
    assert logs.redact("a?token=x&role=viewer") == f"a?token={logs.REDACTED}&role=viewer"
    assert logs.redact("redis://:pw@h:1/0") == f"redis://:{logs.REDACTED}@h:1/0"
    for kept in ("http://127.0.0.1:8765/s/abc", "redis://localhost:6379/0", "sqlite:///a:b@c"):
        assert logs.redact(kept) == kept


def test_the_text_format_ends_a_line_about_a_client_with_it() -> None:
    stream = io.StringIO()
    handler = logs.handler("text", stream)
    log = logging.getLogger("hub.test.text")
    log.addHandler(handler)
    log.propagate = False
    try:
        with logs.client_context("c-42", "local"):
            log.warning("! c-42: slow consumer, token=%s", SECRET)
        log.warning("= no client here")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    first, second = stream.getvalue().splitlines()
    assert re.fullmatch(
        r"\S+ \S+ W hub\.test\.text ! c-42: slow consumer, token=\[redacted\] \[c-42 local\]",
        first,
    )
    assert second.endswith("W hub.test.text = no client here")


def test_the_installed_command_logs_json_lines(tmp_path: Any) -> None:
    """``acp-hub demo --log-format json``: every line on stderr is one JSON object, uvicorn's
    included, and the lines about a client carry its connection id and principal."""
    env = {**os.environ, "ACP_HUB_DEMO_FAST": "1"}
    env.pop("ACP_HUB_CONFIG", None)
    stderr_path = tmp_path / "stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "hub.cli", "demo", "--port", "0", "--log-format", "json"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert process.stdout is not None
    try:
        url = None
        for line in process.stdout:
            match = BANNER.match(line)
            if match:
                url = f"{match.group(2)}:{match.group(3)}"
                break
        assert url is not None, stderr_path.read_text()
        # The credential in the header; a bogus one in the URL, which must not reach the log.
        with connect(
            f"ws://{url}/acp?token={SECRET}", additional_headers=bearer(owner_token())
        ) as ws:
            ws.send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}')
            connection_id = orjson.loads(ws.recv(timeout=20))["result"]["_meta"]["acp-hub"][
                "connectionId"
            ]
            ws.send("{not json")
            assert orjson.loads(ws.recv(timeout=20))["error"]["code"] == -32700
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
    text = stderr_path.read_text()
    entries = [orjson.loads(line) for line in text.splitlines() if line.strip()]
    assert {"time", "level", "logger", "message"} <= set(entries[0])
    assert any(e["logger"].startswith("uvicorn") for e in entries), entries
    about = [e for e in entries if connection_id in e["message"]]
    assert any("invalid message" in e["message"] for e in about), about
    assert all(e.get("connection") == connection_id for e in about), about
    assert all(e.get("principal") == "test-owner" for e in about), about
    assert SECRET not in text
