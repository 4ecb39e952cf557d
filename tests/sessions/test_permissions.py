"""``hub.sessions.permissions`` on its own: who gets a copy of a permission request under each
policy (``first``, ``owner``, ``lease``, ``designated``, ``consensus``), what the records say,
answers refused or declined, and requests nobody may answer, against the in-process stand-ins
of ``tests/sessions/harness.py``."""

from __future__ import annotations

from typing import Any

import pytest

from hub.protocol.errors import FORBIDDEN, INVALID_PARAMS, STALE_ANSWER, InvalidParams, RpcError
from hub.sessions.permissions import _allows
from hub.sessions.session import Session
from tests.sessions.harness import (
    ALLOW,
    OPTIONS,
    Client,
    ask,
    hub_session,
    idle,
    join,
    text,
    until,
)

pytestmark = pytest.mark.anyio

DENY = {"outcome": {"outcome": "selected", "optionId": "deny"}}


def copies(*clients: Client) -> list[int]:
    return [len(c.permission_copies()) for c in clients]


def refusals(client: Client) -> list[int]:
    """The error codes of the ``_hub/answer_refused`` notes ``client`` got."""
    return [p["error"]["code"] for m, p in client.notes if m == "_hub/answer_refused"]


def test_an_outcome_allows_unless_it_rejects_or_cancels() -> None:
    assert _allows(ALLOW["outcome"], OPTIONS)
    assert not _allows(DENY["outcome"], OPTIONS)
    assert not _allows({"outcome": "cancelled"}, OPTIONS)
    # An option of no known kind may allow: it needs the quorum too (fails safe).
    assert _allows({"outcome": "selected", "optionId": "other"}, OPTIONS)


async def test_a_request_without_options_is_refused_and_records_nothing() -> None:
    async with hub_session() as (session, _, _):
        owner = Client("c-o")
        join(session, owner)
        with pytest.raises(InvalidParams):
            await session.on_permission({"sessionId": "a-1", "options": []})
        assert owner.updates("_hub_permission") == []
        assert owner.asked == {}
        assert len(session.permissions) == 0


async def test_a_tool_call_first_seen_in_the_request_is_recorded_and_each_copy_names_it() -> None:
    async with hub_session() as (session, _, tg):
        owner = Client("c-o")
        join(session, owner)
        outcomes: list[dict[str, Any]] = []
        tool = {"toolCallId": "t-1", "title": "Edit a file", "kind": "edit", "status": "pending"}

        async def run() -> None:
            params = {"sessionId": "a-1", "options": OPTIONS, "subject": {"toolCall": tool}}
            outcomes.append(await session.on_permission(params))

        tg.start_soon(run)
        await until(lambda: bool(owner.asked))
        assert owner.fold().tool_call("t-1") is not None
        (pending,) = owner.updates("_hub_permission")
        assert pending["status"] == "pending"
        assert pending["request"]["subject"]["toolCall"] == tool
        ((method, params, _),) = owner.asked.values()
        assert method == "session/request_permission"
        assert params["sessionId"] == session.id  # the hub's id, not the agent's
        assert params["_meta"]["acp-hub"]["permissionId"] == pending["permissionId"]
        owner.answer(owner.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        resolved = owner.updates("_hub_permission")[-1]
        assert resolved["status"] == "resolved"
        assert resolved["outcome"] == ALLOW["outcome"]
        assert resolved["resolvedBy"]["role"] == "owner"


async def test_an_answer_from_a_client_not_eligible_any_more_is_refused() -> None:
    async with hub_session(permission_policy="lease") as (session, _, tg):
        owner, a = Client("c-o"), Client("c-a", role="driver")
        join(session, owner)
        join(session, a)
        session.lease_action(a, "request")
        outcomes = await ask(session, tg)
        (copy,) = a.permission_copies()
        _, _, on_reply = a.asked[copy]
        session.lease_action(owner, "grant", None)  # the lease moves away: the copy goes
        assert a.withdrawn == [copy]
        on_reply(ALLOW, None)  # the answer crossed the withdrawal on the wire
        assert refusals(a) == [FORBIDDEN]
        assert outcomes == []
        owner.answer(owner.permission_copies()[0], DENY)
        await until(lambda: bool(outcomes))
        assert outcomes == [DENY["outcome"]]


async def test_a_client_that_declines_is_not_asked_again() -> None:
    async with hub_session() as (session, _, tg):
        a, b = Client("c-a", role="approver"), Client("c-b", role="approver")
        join(session, a)
        join(session, b)
        outcomes = await ask(session, tg)
        a.answer(a.permission_copies()[0], error=RpcError(-32603, "no dialog here"))
        assert copies(a, b) == [0, 1]
        b.answer(b.permission_copies()[0], error=RpcError(-32603, "no dialog here either"))
        await until(lambda: bool(outcomes))  # nobody left to answer it: cancelled
        assert outcomes == [{"outcome": "cancelled"}]
        assert a.updates("_hub_permission")[-1]["status"] == "cancelled"


async def test_a_changed_policy_moves_the_copies() -> None:
    async with hub_session() as (session, _, tg):
        owner, driver = Client("c-o"), Client("c-d", role="driver")
        join(session, owner)
        join(session, driver)
        outcomes = await ask(session, tg)
        assert copies(owner, driver) == [1, 1]
        session.emit_policies(permission="owner")
        session.permissions.reoffer()
        assert copies(owner, driver) == [1, 0]
        assert len(driver.withdrawn) == 1
        session.emit_policies(permission="first")
        session.permissions.reoffer()
        assert copies(owner, driver) == [1, 1]
        driver.answer(driver.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert copies(owner, driver) == [0, 0]


async def prompt_as(session: Session, client: Client) -> None:
    await session.prompt(client, text(f"from {client.principal}"))


async def test_designated_offers_the_senders_principal_then_owners_once_it_is_gone() -> None:
    async with hub_session(permission_policy="designated") as (session, _, tg):
        owner = Client("c-o", principal="olga")
        ann_1 = Client("c-a1", role="driver", principal="ann")
        ann_2 = Client("c-a2", role="approver", principal="ann")
        bob = Client("c-b", role="approver", principal="bob")
        for client in (owner, ann_1, ann_2, bob):
            join(session, client)
        assert session.permissions.designated() is None  # no turn: owners answer
        await prompt_as(session, ann_1)
        assert session.permissions.designated() == "ann"
        outcomes = await ask(session, tg)
        assert copies(owner, ann_1, ann_2, bob) == [0, 1, 1, 0]
        session.detach(ann_1)
        session.detach(ann_2)
        assert session.permissions.designated() is None
        session.permissions.reoffer()
        assert copies(owner, bob) == [1, 0]
        owner.answer(owner.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes == [ALLOW["outcome"]]
        idle(session)


async def test_consensus_needs_the_quorum_of_principals_and_a_reject_ends_it() -> None:
    async with hub_session(permission_policy="consensus", consensus_quorum=2) as (
        session,
        _,
        tg,
    ):
        ann_1, ann_2 = Client("c-a1", principal="ann"), Client("c-a2", principal="ann")
        bob, cy = Client("c-b", principal="bob"), Client("c-c", principal="cy")
        for client in (ann_1, ann_2, bob, cy):
            join(session, client)
        outcomes = await ask(session, tg)
        assert copies(ann_1, ann_2, bob, cy) == [1, 1, 1, 1]
        ann_1.answer(ann_1.permission_copies()[0], ALLOW)
        # One principal allowed: its other clients are not asked again, the record counts it.
        assert copies(ann_1, ann_2, bob, cy) == [0, 0, 1, 1]
        progress = bob.updates("_hub_permission")[-1]
        assert progress["status"] == "pending"
        assert progress["needed"] == 2
        assert [a["principal"] for a in progress["approvals"]] == ["ann"]
        assert outcomes == []
        bob.answer(bob.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes == [ALLOW["outcome"]]
        final = cy.updates("_hub_permission")[-1]
        assert final["status"] == "resolved"
        assert [a["principal"] for a in final["approvals"]] == ["ann", "bob"]
        # The next request: one reject decides at once.
        outcomes = await ask(session, tg)
        cy.answer(cy.permission_copies()[0], DENY)
        await until(lambda: bool(outcomes))
        assert outcomes == [DENY["outcome"]]


async def test_consensus_refuses_a_second_allow_of_one_principal() -> None:
    async with hub_session(permission_policy="consensus", consensus_quorum=2) as (
        session,
        _,
        tg,
    ):
        ann_1, ann_2 = Client("c-a1", principal="ann"), Client("c-a2", principal="ann")
        bob = Client("c-b", principal="bob")
        for client in (ann_1, ann_2, bob):
            join(session, client)
        await ask(session, tg)
        (copy,) = ann_2.permission_copies()
        _, _, on_reply = ann_2.asked[copy]
        ann_1.answer(ann_1.permission_copies()[0], ALLOW)
        on_reply(ALLOW, None)  # ann's second client answered before its copy was withdrawn
        assert refusals(ann_2) == [STALE_ANSWER]
        assert session.permissions.pending  # still waiting for a second principal


async def test_a_malformed_answer_gets_an_invalid_params_refusal() -> None:
    async with hub_session() as (session, _, tg):
        owner = Client("c-o")
        join(session, owner)
        outcomes = await ask(session, tg)
        owner.answer(owner.permission_copies()[0], {"outcome": "yes please"})
        assert refusals(owner) == [INVALID_PARAMS]
        owner.answer(owner.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes == [ALLOW["outcome"]]
