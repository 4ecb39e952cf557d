"""The permission policies that look at principals, end to end with three principals (each a
credential of its own) on v1 and v2 clients: ``designated`` and ``consensus``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.credentials import token
from tests.server.harness import AcpClient, acp_client, running_hub, scripted_agent
from tests.server.test_arbitration import (
    allow,
    hub_updates,
    permission_requests,
    refusals,
    resume,
    texts,
)

pytestmark = pytest.mark.anyio


def records(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return hub_updates(client, sid, "_hub_permission")


def final(client: AcpClient, sid: str, count: int) -> list[dict[str, Any]]:
    return [r for r in records(client, sid) if r["status"] != "pending"][:count]


def policy_of(client: AcpClient, sid: str) -> str | None:
    """The permission policy of the last ``_hub_policy`` update ``client`` received."""
    updates = hub_updates(client, sid, "_hub_policy")
    return str(updates[-1]["permission"]) if updates else None


def asked(client: AcpClient, count: int) -> Callable[[], bool]:
    """Whether ``client`` received ``count`` permission copies."""
    return lambda: len(permission_requests(client)) >= count


async def resolved(client: AcpClient, sid: str, count: int) -> dict[str, Any]:
    """Wait for the ``count``-th permission resolution ``client`` sees; return it."""
    await client.wait_for(lambda: len(final(client, sid, count)) >= count)
    return final(client, sid, count)[-1]


async def test_designated_the_prompter_answers_then_owners_when_it_leaves() -> None:
    async with running_hub([scripted_agent()]) as hub:
        bob_url = hub.url_with(token("driver", sub="bob", name="Bob"))
        async with (
            acp_client(hub.url_with(token("owner", sub="alice", agents=None))) as alice,
            acp_client(hub.url_with(token("approver", sub="carol")), 2) as carol,
        ):
            sid = await alice.new_session()
            await alice.call("_hub/set_policy", {"sessionId": sid, "permission": "designated"})
            await resume(carol, sid)
            await alice.wait_for(lambda: policy_of(alice, sid) == "designated")
            async with acp_client(bob_url, 1, events=True) as bob:
                await resume(bob, sid)
                await bob.start(
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "text", "text": "permission"}]},
                )
                await bob.wait_for(lambda: bool(permission_requests(bob)))
                await bob.answer(permission_requests(bob)[-1]["id"], allow("allow"))
                record = await resolved(alice, sid, 1)
                assert record["resolvedBy"]["principal"] == "bob"
                # Only the prompt's sender was asked: not the owner, not the other approver.
                assert not permission_requests(alice)
                assert not permission_requests(carol)
                await alice.wait_for(lambda: texts(alice, sid, "permission:") != [])
                # Bob prompts again and leaves while the request waits: owners may answer.
                await bob.start(
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "text", "text": "permission"}]},
                )
                await bob.wait_for(lambda: len(permission_requests(bob)) >= 2)
            await alice.wait_for(lambda: bool(permission_requests(alice)))
            await alice.answer(permission_requests(alice)[-1]["id"], allow("reject"))
            record = await resolved(carol, sid, 2)
            assert record["resolvedBy"]["principal"] == "alice"
            assert record["resolvedBy"]["role"] == "owner"
            assert not permission_requests(carol)


async def test_consensus_needs_distinct_principals_and_any_reject_rejects() -> None:
    async with running_hub([scripted_agent()]) as hub:
        bob_url = hub.url_with(token("approver", sub="bob"))
        async with (
            acp_client(hub.url_with(token("owner", sub="alice", agents=None))) as alice,
            acp_client(bob_url, 1, events=True) as bob,
            acp_client(bob_url, 2) as bob_tab,
            acp_client(hub.url_with(token("approver", sub="carol")), 2) as carol,
        ):
            sid = await alice.new_session()
            policy = await alice.call(
                "_hub/set_policy", {"sessionId": sid, "permission": "consensus", "quorum": 2}
            )
            assert policy["quorum"] == 2
            for client in (bob, bob_tab, carol):
                await resume(client, sid)
            # The policy change is an update everyone attached sees.
            await alice.wait_for(lambda: policy_of(alice, sid) == "consensus")
            await alice.prompt(sid, "permission")
            for client in (alice, bob, bob_tab, carol):
                await client.wait_for(asked(client, 1))
            await bob.answer(permission_requests(bob)[-1]["id"], allow("allow"))
            # Progress is visible to everyone; Bob's other tab no longer counts.
            await carol.wait_for(lambda: any(r.get("approvals") for r in records(carol, sid)))
            progress = next(r for r in records(carol, sid) if r.get("approvals"))
            assert [a["principal"] for a in progress["approvals"]] == ["bob"]
            assert progress["needed"] == 2
            await bob_tab.wait_for(lambda: bool(bob_tab.cancelled))
            assert not final(alice, sid, 1)
            await carol.answer(permission_requests(carol)[-1]["id"], allow("allow"))
            record = await resolved(alice, sid, 1)
            assert record["outcome"]["optionId"] == "allow"
            assert [a["principal"] for a in record["approvals"]] == ["bob", "carol"]
            assert record["resolvedBy"]["principal"] == "carol"
            await alice.wait_for(lambda: "permission: selected allow" in texts(alice, sid, "perm"))
            # Second round: one allow, then one reject: rejected at once.
            before = {id(c): len(permission_requests(c)) for c in (bob, carol)}
            await alice.prompt(sid, "permission")
            for client in (bob, carol):
                await client.wait_for(asked(client, before[id(client)] + 1))
            second = permission_requests(carol)[-1]
            pid = second["params"]["_meta"]["acp-hub"]["permissionId"]
            await carol.answer(second["id"], allow("allow"))
            await bob.wait_for(
                lambda: any(
                    r.get("approvals") for r in records(bob, sid) if r["permissionId"] == pid
                )
            )
            await bob.answer(permission_requests(bob)[-1]["id"], allow("reject"))
            record = await resolved(alice, sid, 2)
            assert record["outcome"]["optionId"] == "reject"
            assert record["resolvedBy"]["principal"] == "bob"
            await alice.wait_for(lambda: "permission: selected reject" in texts(alice, sid, "perm"))
            assert not refusals(carol)
        # The audit trail names who changed the policy and who decided.
        audit = [
            json.loads(line)
            for line in (hub.app.gate.state_dir / "audit.jsonl").read_text().splitlines()
        ]
        changed = [e for e in audit if e["event"] == "policy_changed"]
        assert (changed[-1]["principal"], changed[-1]["permission"]) == ("alice", "consensus")
        decided = [e for e in audit if e["event"] == "permission_decided"]
        assert [(e["principal"], e["outcome"]["optionId"]) for e in decided] == [
            ("carol", "allow"),
            ("bob", "reject"),
        ]
        assert decided[0]["approvals"] == ["bob", "carol"]
