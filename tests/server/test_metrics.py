"""``/metrics`` over real HTTP: refused without its token, parsed with ``prometheus_client``'s
own parser, and its series moving as real clients run a scripted agent's session."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Mapping

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hub.server.app import create_app
from hub.server.metrics import close_code_label
from hub.sessions.ops import SessionOps
from hub.settings import Settings
from tests.redis_server import RedisServer

# The shared harness's names, imported by every test module that uses them.
from tests.server.harness import (
    AcpClient,
    HubHandle,
    RpcFailure,
    acp_client,
    running_hub,
    scripted_agent,
)
from tests.store.test_contract import BOUNDS, Writer

pytestmark = pytest.mark.anyio

TOKEN = "metrics-token-0123456789abcdef"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _get(url: str, headers: Mapping[str, str]) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=dict(headers))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read().decode()


async def scrape(hub: HubHandle, token: str = TOKEN) -> Samples:
    """Every sample of ``/metrics``, by name and labels, through the Prometheus parser."""
    headers = {"Authorization": f"Bearer {token}"}
    status, _, text = await anyio.to_thread.run_sync(_get, hub.http + "/metrics", headers)
    assert status == 200, text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_are_refused_without_the_token() -> None:
    async with running_hub([scripted_agent()], Settings(metrics_token=TOKEN)) as hub:
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-0123456789"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": TOKEN},
        ):
            status, response_headers, body = await anyio.to_thread.run_sync(
                _get, hub.http + "/metrics", headers
            )
            assert status == 401, headers
            assert response_headers["www-authenticate"].startswith("Bearer")
            assert "acp_hub" not in body
        assert await scrape(hub)


async def test_metrics_are_refused_to_everyone_when_no_token_is_set() -> None:
    async with running_hub([scripted_agent()]) as hub:
        for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer x"}):
            status, _, body = await anyio.to_thread.run_sync(_get, hub.http + "/metrics", headers)
            assert status == 401
            assert "acp_hub" not in body


def test_a_short_or_spaced_token_is_a_configuration_error() -> None:
    for token in ("short", "a token with spaces in it", "tab\tseparated-0123456789"):
        with pytest.raises(ValueError, match="metrics_token"):
            Settings().merged({"metrics_token": token})
    assert TOKEN not in repr(Settings(metrics_token=TOKEN))


async def test_connections_and_closes_are_counted() -> None:
    async with running_hub([scripted_agent()], Settings(metrics_token=TOKEN)) as hub:
        before = await scrape(hub)
        assert value(before, "acp_hub_connections_opened_total", transport="websocket") == 0
        async with acp_client(hub.url) as v2, acp_client(hub.url, version=1):
            await v2.new_session()
            during = await scrape(hub)
            for version in ("1", "2"):
                labels = {"transport": "websocket", "protocol_version": version, "role": "owner"}
                assert value(during, "acp_hub_connections", **labels) == 1
            assert value(during, "acp_hub_connections_opened_total", transport="websocket") == 2
            assert value(during, "acp_hub_sessions", state="idle") == 1
            assert value(during, "acp_hub_agent_up", agent="scripted") == 1
        # Both clients closed with 1000; the hub counts a close when it has let go of the
        # connection, so wait for that.
        with anyio.fail_after(20):
            while hub.app.connections:  # noqa: ASYNC110 - no event for a connection's end
                await anyio.sleep(0.01)
        after = await scrape(hub)
        assert value(after, "acp_hub_connection_closes_total", code="1000") == 2
        labels = {"transport": "websocket", "protocol_version": "2", "role": "owner"}
        assert value(after, "acp_hub_connections", **labels) == 0
        assert value(after, "process_resident_memory_bytes") > 0


async def caught_up(session: SessionOps, *clients: AcpClient) -> None:
    """Wait until every client received every event of ``session`` (nothing left coalescing)."""
    for client in clients:
        await client.wait_for(_has_all(session, client))


def _has_all(session: SessionOps, client: AcpClient) -> Callable[[], bool]:
    return lambda: session.settled and client.last_seq(session.id) == session.cursor["seq"]


def live_frames(client: AcpClient, sid: str, after: int) -> int:
    """The live ``session/update`` frames ``client`` received with a seq above ``after``."""
    return sum(1 for seq in client.seqs(sid) if seq > after)


async def test_counters_move_as_a_scripted_session_runs() -> None:
    async with (
        running_hub([scripted_agent()], Settings(metrics_token=TOKEN)) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, 1, events=True) as v1,
    ):
        sid = await owner.new_session()
        assert hub.app.registry is not None
        session = hub.app.registry.get(sid)
        await v1.call("session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        await caught_up(session, owner, v1)
        before = await scrape(hub)
        start = session.cursor["seq"]
        # The load's catch-up was timed once the transport took its last frame, before the
        # load's answer went out.
        assert value(before, "acp_hub_catch_up_duration_seconds_count", kind="replay") == 1
        assert value(before, "acp_hub_catch_up_bytes_total", kind="replay") > 0

        await owner.prompt(sid, "say hello\npermission\nsay done")
        await owner.wait_for(lambda: bool(owner.requests))
        request = owner.requests[-1]
        assert request["method"] == "session/request_permission"
        await owner.answer(request["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}})
        await owner.wait_for(lambda: owner.idle_count(sid) == 1)
        await caught_up(session, owner, v1)
        after = await scrape(hub)

        def delta(name: str, **labels: str) -> float:
            return value(after, name, **labels) - value(before, name, **labels)

        # Every live frame either client received was counted once, and nothing else.
        delivered = live_frames(owner, sid, start) + live_frames(v1, sid, start)
        assert delivered > 10
        assert delta("acp_hub_deliveries_total") == delivered
        assert delta("acp_hub_delivered_bytes_total") > 100 * delivered
        assert 0 < delta("acp_hub_updates_in_total") < live_frames(owner, sid, start)
        assert delta("acp_hub_permission_outcomes_total", outcome="selected") == 1
        assert delta("acp_hub_permission_outcomes_total", outcome="cancelled") == 0
        assert delta("acp_hub_permission_answer_seconds_count", outcome="selected") == 1
        assert delta("acp_hub_turn_duration_seconds_count") == 1
        assert delta("acp_hub_turn_duration_seconds_sum") > 0
        labels = {"transport": "websocket", "protocol_version": "1", "role": "owner"}
        assert value(after, "acp_hub_connections", **labels) == 1

        # A client that comes back with its cursor is a resume (so is the creator's catch-up
        # of what the session emitted while it was created, from seq 0).
        assert value(after, "acp_hub_catch_up_duration_seconds_count", kind="resume") == 1
        cursor = session.cursor
        await owner.prompt(sid, "say again")
        await owner.wait_for(lambda: owner.idle_count(sid) == 2)
        async with acp_client(hub.url) as again:
            await again.call(
                "session/resume",
                {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "_hub_after", **cursor}},
            )
            resumed = await scrape(hub)
        assert value(resumed, "acp_hub_catch_up_duration_seconds_count", kind="resume") == 2
        assert value(resumed, "acp_hub_catch_up_duration_seconds_count", kind="reset") == 0


def _agent_status(client: AcpClient, sid: str, status: str) -> Callable[[], bool]:
    return lambda: any(
        p["update"].get("sessionUpdate") == "_hub_agent" and p["update"].get("status") == status
        for p in client.session_updates(sid)
    )


async def test_an_agent_restart_and_a_lost_session_are_counted() -> None:
    async with (
        running_hub([scripted_agent()], Settings(metrics_token=TOKEN)) as hub,
        acp_client(hub.url) as client,
    ):
        sid = await client.new_session()
        before = await scrape(hub)
        assert value(before, "acp_hub_agent_restarts_total", agent="scripted") == 0
        await client.prompt(sid, "crash")
        await client.wait_for(_agent_status(client, sid, "exited"))
        # The next operation starts a new process, which cannot resume the session.
        with pytest.raises(RpcFailure):
            await client.prompt(sid, "say after the crash")
        await client.wait_for(_agent_status(client, sid, "lost"))
        after = await scrape(hub)
        assert value(after, "acp_hub_agent_restarts_total", agent="scripted") == 1
        assert value(after, "acp_hub_agent_up", agent="scripted") == 1
        assert value(after, "acp_hub_sessions", state="lost") == 1
        assert value(after, "acp_hub_sessions", state="idle") == 0


async def test_an_unreachable_store_shows_in_metrics_and_readiness(
    redis_server: RedisServer,
) -> None:
    settings = Settings(metrics_token=TOKEN, store=redis_server.url)
    async with running_hub([scripted_agent()], settings) as hub:
        store = hub.app.store
        writer = Writer("s-metrics", store.open_log("s-metrics", **BOUNDS))
        writer.many(3)
        await store.flush()
        ok = await scrape(hub)
        assert value(ok, "acp_hub_store_up", kind="redis") == 1
        assert value(ok, "acp_hub_store_write_failures_total", kind="redis") == 0
        await anyio.to_thread.run_sync(redis_server.stop)
        writer.many(3)
        with anyio.fail_after(30):
            while store.healthy:  # noqa: ASYNC110 - the writer's failure is the event awaited
                await anyio.sleep(0.02)
        writer.many(3)  # waits behind the batch being retried
        down = await scrape(hub)
        assert value(down, "acp_hub_store_up", kind="redis") == 0
        assert value(down, "acp_hub_store_write_failures_total", kind="redis") >= 1
        assert value(down, "acp_hub_store_backlog_events", kind="redis") >= 3
        status, _, body = await anyio.to_thread.run_sync(_get, hub.http + "/readyz", {})
        assert status == 503
        assert '"store":false' in body
        await anyio.to_thread.run_sync(redis_server.start)
        with anyio.fail_after(30):
            await store.flush()
        back = await scrape(hub)
        assert value(back, "acp_hub_store_up", kind="redis") == 1
        assert value(back, "acp_hub_store_backlog_events", kind="redis") == 0


def test_two_hubs_in_one_process_have_their_own_series() -> None:
    _, first = create_app(Settings(), {"a": scripted_agent("a")})
    _, second = create_app(Settings(), {"a": scripted_agent("a")})
    first.metrics.closed(1000)
    assert b'acp_hub_connection_closes_total{code="1000"} 1.0' in first.metrics.render()
    assert b'code="1000"' not in second.metrics.render()


def test_a_client_cannot_mint_close_code_series() -> None:
    assert [close_code_label(c) for c in (1000, 1013, 4001, 3000, 4999, 65535, None)] == [
        "1000",
        "1013",
        "4001",
        "other",
        "other",
        "other",
        "none",
    ]


def test_the_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from hub.cli import _parser
    from hub.cli.serve import build

    monkeypatch.setenv("ACP_HUB_METRICS_TOKEN", TOKEN)
    settings, _, _ = build(_parser().parse_args(["demo"]))
    assert settings.metrics_token == TOKEN
    monkeypatch.setenv("ACP_HUB_METRICS_TOKEN", "short")
    with pytest.raises(ValueError, match="metrics_token"):
        build(_parser().parse_args(["demo"]))
