"""Webhooks end to end: a real hub with a real agent posts its notices to a real HTTP receiver
on loopback. The payload matches its JSON Schema and is signed; a 5xx is retried and a 4xx is
not; a receiver that hangs holds up nothing but its own queue, whose overflow is counted."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from hub.server.webhooks import parse_webhooks
from hub.settings import Settings
from tests.credentials import owner_token
from tests.server.harness import AcpClient, HubHandle, acp_client, running_hub, scripted_agent
from tests.server.test_arbitration import allow, permission_requests
from tests.server.webhook_receiver import webhook_receiver

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "webhook.schema.json").read_text())
SECRET = "a-shared-secret-for-the-receiver"


def hooked(*hooks: dict[str, Any], **settings: Any) -> Settings:
    return replace(Settings(), webhooks=tuple(hooks), **settings)


def count(hub: HubHandle, name: str, result: str) -> float:
    value = hub.app.metrics.registry.get_sample_value(
        "acp_hub_webhook_deliveries_total", {"webhook": name, "result": result}
    )
    return value or 0.0


async def counted(hub: HubHandle, predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate`` holds, re-checked after each outcome the webhooks count."""
    with anyio.fail_after(20):
        while not predicate():
            await hub.app.webhooks.progress()


def said(client: AcpClient, sid: str) -> str:
    """What the agent said in ``sid``, as ``client`` received it."""
    return "".join(
        str(p["update"]["content"].get("text"))
        for p in client.session_updates(sid)
        if p["update"].get("sessionUpdate") == "agent_message_chunk"
    )


async def permission_turn(client: AcpClient, sid: str) -> None:
    """A turn in which the agent asks for a permission, answered ``allow``."""
    prompt = await client.start(
        "session/prompt",
        {"sessionId": sid, "prompt": [{"type": "text", "text": "permission Edit main.py"}]},
    )
    await client.wait_for(lambda: bool(permission_requests(client)))
    await client.answer(permission_requests(client)[-1]["id"], allow("allow"))
    await client.result(prompt)


async def test_the_payload_matches_its_schema_is_signed_and_links_without_a_token() -> None:
    async with webhook_receiver() as receiver:
        hook = {
            "name": "team",
            "url": receiver.url(),
            "events": ["permission_waiting", "turn_ended"],
            "secret": SECRET,
        }
        settings = hooked(hook, public_url="https://hub.example.org/")
        async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
            sid = await client.new_session()
            await permission_turn(client, sid)
            await counted(hub, lambda: count(hub, "team", "delivered") == 2)
    waiting, ended = receiver.received
    for delivery in (waiting, ended):
        jsonschema.validate(delivery.json, SCHEMA)
        expected = hmac.new(SECRET.encode(), delivery.body, hashlib.sha256).hexdigest()
        assert delivery.headers["x-acp-hub-signature-256"] == f"sha256={expected}"
        assert delivery.headers["x-acp-hub-timestamp"] == str(delivery.json["timestamp"])
        assert delivery.headers["content-type"] == "application/json"
        assert owner_token() not in delivery.body.decode()
        assert SECRET not in delivery.body.decode()
        assert delivery.json["session"] == {
            "id": sid,
            "agent": "scripted",
            "cwd": "/tmp",
            "url": f"https://hub.example.org/s/{sid}",
        }
    assert waiting.headers["x-acp-hub-event"] == "permission_waiting"
    assert waiting.json["event"] == "permission_waiting"
    assert waiting.json["detail"]["title"] == "Allow: Edit main.py?"
    assert waiting.json["detail"]["kind"] == "edit"
    assert ended.json["event"] == "turn_ended"
    assert ended.json["detail"]["stopReason"] == "end_turn"
    assert ended.json["seq"] > waiting.json["seq"]


async def test_slack_format_and_filters() -> None:
    async with webhook_receiver() as receiver:
        slack = {"name": "slack", "url": receiver.url("/slack"), "events": ["turn_ended"]}
        slack |= {"format": "slack"}
        elsewhere = {
            "name": "other-agent",
            "url": receiver.url("/other"),
            "events": ["turn_ended"],
            "agents": ["not-this-one"],
        }
        settings = hooked(slack, elsewhere, public_url="https://hub.example.org")
        async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
            sid = await client.new_session()
            await client.prompt(sid, "say <b>hello</b>")
            await receiver.wait_for(lambda: bool(receiver.at("/slack")))
    (posted,) = receiver.at("/slack")
    assert "x-acp-hub-signature-256" not in posted.headers  # no secret, no signature
    body = posted.json
    assert body["text"] == f"scripted ended its turn in session {sid}: end_turn"
    (block,) = body["blocks"]
    assert block["type"] == "section"
    assert f"<https://hub.example.org/s/{sid}|Open the session>" in block["text"]["text"]
    # The filtered webhook saw nothing (its agent is another).
    assert receiver.at("/other") == []


async def test_a_5xx_is_retried_a_4xx_is_not() -> None:
    async with webhook_receiver(flaky=[500, 503, 200], refusing=[404]) as receiver:
        base = {"events": ["turn_ended"], "retry_delay": 0.01}
        flaky = {**base, "name": "flaky", "url": receiver.url("/flaky")}
        refusing = {**base, "name": "refusing", "url": receiver.url("/refusing")}
        async with (
            running_hub([scripted_agent()], hooked(flaky, refusing)) as hub,
            acp_client(hub.url) as client,
        ):
            sid = await client.new_session()
            await client.prompt(sid, "say hi")
            await counted(
                hub,
                lambda: (
                    count(hub, "flaky", "delivered") == 1 and count(hub, "refusing", "failed") == 1
                ),
            )
            assert count(hub, "flaky", "retried") == 2
            assert count(hub, "refusing", "retried") == 0
    attempts = receiver.at("/flaky")
    assert len(attempts) == 3
    assert len({a.body for a in attempts}) == 1  # the same delivery, retried
    assert len(receiver.at("/refusing")) == 1


async def test_a_hung_receiver_delays_nothing_else() -> None:
    async with webhook_receiver(hung=["hang"] * 10, held=["hang"]) as receiver:
        hung: dict[str, Any] = {"name": "hung", "url": receiver.url("/hung")}
        hung |= {"events": ["turn_ended"], "queue": 2, "timeout": 600}
        fine = {"name": "fine", "url": receiver.url("/fine"), "events": ["turn_ended"]}
        held = {"name": "held", "url": receiver.url("/held"), "events": ["permission_waiting"]}
        async with (
            running_hub([scripted_agent()], hooked(hung, fine, held | {"timeout": 600})) as hub,
            acp_client(hub.url) as driver,
            acp_client(hub.url) as watcher,
        ):
            sid = await driver.new_session()
            await watcher.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
            prompt = await driver.start(
                "session/prompt",
                {
                    "sessionId": sid,
                    "prompt": [{"type": "text", "text": "permission Edit main.py\nsay one"}],
                },
            )
            # The held receiver takes the permission's notice and answers nothing ...
            await receiver.wait_for(lambda: len(receiver.at("/held")) == 1)
            assert watcher.idle_count(sid) == 0
            await driver.wait_for(lambda: bool(permission_requests(driver)))
            await driver.answer(permission_requests(driver)[-1]["id"], allow("allow"))
            await driver.result(prompt)
            # ... while the rest of the turn, and its end, still reach both clients: the
            # delivery is still open (nothing answers it before `release`).
            await driver.wait_for(lambda: driver.idle_count(sid) == 1)
            await watcher.wait_for(lambda: watcher.idle_count(sid) == 1)
            assert said(driver, sid) == said(watcher, sid) == "permission: selected allowone"
            assert not receiver.released.is_set()
            assert len(receiver.at("/held")) == 1
            # The hung receiver holds the first turn's end and answers nothing ...
            await receiver.wait_for(lambda: len(receiver.at("/hung")) == 1)
            # ... while every turn still runs and reaches both clients, and the other webhook
            # gets each one; the hung one's queue (2) overflows and says so.
            for n in range(4):
                await driver.prompt(sid, f"say turn {n}")
            await watcher.wait_for(lambda: watcher.idle_count(sid) == 5)
            await counted(hub, lambda: count(hub, "fine", "delivered") == 5)
            assert count(hub, "hung", "dropped") == 2
            assert len(receiver.at("/hung")) == 1
            # Released, it gets the one it held and the two its queue kept.
            receiver.release()
            await counted(hub, lambda: count(hub, "hung", "delivered") == 3)
            assert len(receiver.at("/hung")) == 3
            await counted(hub, lambda: count(hub, "held", "delivered") == 1)


def test_webhooks_are_checked_at_start() -> None:
    good = {"url": "https://hooks.example/x", "events": ["turn_ended"]}
    assert parse_webhooks([good])[0].name == "0"
    for bad, message in (
        ({**good, "url": "ftp://x"}, "url"),
        ({**good, "events": ["everything"]}, "events"),
        ({**good, "events": []}, "events"),
        ({**good, "format": "xml"}, "format"),
        ({**good, "retries": -1}, "retries"),
        ({**good, "queue": 0}, "queue"),
        ({**good, "hmm": 1}, "unknown"),
        ({**good, "agents": "a"}, "agents"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_webhooks([bad])
    with pytest.raises(ValueError, match="same name"):
        parse_webhooks([{**good, "name": "a"}, {**good, "name": "a"}])
    # The URL and the secret never show in a log line.
    hook = parse_webhooks([{**good, "url": "https://hooks.example/T0/B0/XXXX", "secret": "s3"}])[0]
    assert "XXXX" not in repr(hook)
    assert "s3" not in repr(hook)
    assert "XXXX" not in repr(hooked({**good, "url": "https://h/XXXX"}))


async def test_an_elicitation_waiting_is_a_notice() -> None:
    async with webhook_receiver() as receiver:
        hook = {"name": "ask", "url": receiver.url(), "events": ["elicitation_waiting"]}
        async with (
            running_hub([scripted_agent()], hooked(hook)) as hub,
            acp_client(hub.url) as client,
        ):
            sid = await client.new_session()
            prompt = await client.start(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "elicit force"}]},
            )
            await client.wait_for(
                lambda: any(r["method"] == "elicitation/create" for r in client.requests)
            )
            (asked,) = [r for r in client.requests if r["method"] == "elicitation/create"]
            await receiver.wait_for(lambda: bool(receiver.received))
            await client.answer(asked["id"], {"action": "decline"})
            await client.result(prompt)
    (posted,) = receiver.received
    jsonschema.validate(posted.json, SCHEMA)
    assert posted.json["event"] == "elicitation_waiting"
    assert posted.json["seq"] is None
    assert posted.json["detail"]["mode"] == "form"
    assert posted.json["detail"]["message"] == asked["params"]["message"]


# Set up like the tests around it: each test spells out its own scenario.
async def test_a_request_a_rule_answers_is_no_notice() -> None:
    async with webhook_receiver() as receiver:
        hook = {
            "name": "team",
            "url": receiver.url(),
            "events": ["permission_waiting", "turn_ended"],
        }
        rule = {"match": {"kind": "edit"}, "answer": "allow"}
        settings = hooked(hook, permission_rules=(rule,))
        async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as client:
            sid = await client.new_session()
            await client.prompt(sid, "permission-edit src/a.py")
            await client.wait_for(lambda: client.idle_count(sid) >= 1)
            # One webhook posts in order: once the turn's end arrived, nothing came before it.
            await counted(hub, lambda: count(hub, "team", "delivered") == 1)
    assert [r.json["event"] for r in receiver.received] == ["turn_ended"]
