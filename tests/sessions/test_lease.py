"""``hub.sessions.lease`` on its own: who may request, release, grant and revoke the prompt
lease, what each change emits, how long it runs, and the watch that takes it from an inactive
holder, against the in-process stand-ins of ``tests/sessions/harness.py``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from hub.protocol.errors import FORBIDDEN, INVALID_PARAMS, NOT_LEASE_HOLDER
from hub.sessions.errors import SessionFailure
from tests.sessions.harness import Client, hub_session, idle, join, record, text, until

pytestmark = pytest.mark.anyio


def refused(call: Callable[[], Any]) -> tuple[int, Any]:
    """The code and data of the error ``call`` is refused with."""
    with pytest.raises(SessionFailure) as info:
        call()
    return info.value.error.code, info.value.error.data


async def test_each_change_emits_the_holder_and_why() -> None:
    async with hub_session(lease_timeout=60) as (session, _, _):
        owner, a = Client("c-o"), Client("c-a", role="driver", name="Ann", principal="ann")
        join(session, owner)
        join(session, a)
        assert session.lease_action(a, "request") == {"holder": "c-a"}
        lease = owner.updates("_hub_lease")[-1]
        assert lease["holder"] == {"clientId": "c-a", "name": "Ann", "principal": "ann"}
        assert lease["reason"] == "requested"
        assert lease["expiresAt"].endswith("Z")
        assert session.lease_action(a, "request") == {"holder": "c-a"}  # again: renewed
        assert session.lease_action(a, "release") == {"holder": None}
        assert session.lease_action(owner, "grant", "c-a") == {"holder": "c-a"}
        assert session.lease_action(owner, "grant", None) == {"holder": None}
        reasons = [u["reason"] for u in owner.updates("_hub_lease")]
        assert reasons == ["requested", "requested", "released", "granted", "revoked"]
        assert owner.updates("_hub_lease")[-1] == {
            "sessionUpdate": "_hub_lease",
            "holder": None,
            "reason": "revoked",
        }
        # Releasing a lease nobody holds changes nothing.
        count = len(owner.updates("_hub_lease"))
        assert session.lease_action(a, "release") == {"holder": None}
        assert len(owner.updates("_hub_lease")) == count


async def test_only_drivers_hold_it_and_only_the_holder_or_an_owner_releases_it() -> None:
    async with hub_session(lease_timeout=60) as (session, _, _):
        owner, viewer = Client("c-o"), Client("c-v", role="viewer")
        a, b = Client("c-a", role="driver"), Client("c-b", role="driver")
        for client in (owner, viewer, a, b):
            join(session, client)
        assert refused(lambda: session.lease_action(viewer, "request"))[0] == FORBIDDEN
        session.lease_action(a, "request")
        assert refused(lambda: session.lease_action(b, "request")) == (
            NOT_LEASE_HOLDER,
            {"holder": "c-a"},
        )
        assert refused(lambda: session.lease_action(b, "release")) == (
            NOT_LEASE_HOLDER,
            {"holder": "c-a"},
        )
        assert refused(lambda: session.lease_action(a, "grant", "c-b"))[0] == FORBIDDEN
        assert refused(lambda: session.lease_action(owner, "grant", "c-v"))[0] == FORBIDDEN
        assert refused(lambda: session.lease_action(owner, "grant", "c-x"))[0] == INVALID_PARAMS
        assert refused(lambda: session.lease_action(owner, "steal"))[0] == INVALID_PARAMS
        assert session.lease.held_by("c-a")  # none of the refusals moved it
        assert session.lease_action(owner, "release") == {"holder": None}


async def test_activity_renews_it_and_detaching_releases_it() -> None:
    async with hub_session(prompt_policy="lease", lease_timeout=30) as (session, _, _):
        owner, a = Client("c-o"), Client("c-a", role="driver")
        join(session, owner)
        join(session, a)
        lease = session.lease
        assert lease.expire() is None  # nobody holds it: nothing to watch
        session.lease_action(a, "request")
        left = lease.expire()
        assert left is not None
        assert 29 < left <= 30
        lease.expires = time.monotonic() + 1  # as if the holder had been idle for 29 s
        await session.prompt(a, text("hi"))  # a prompt is activity: 30 s again
        assert owner.updates("_hub_lease")[-1]["reason"] == "renewed"
        assert lease.expire() == 30  # and while its turn runs, the clock stands still
        idle(session)
        left = lease.expire()
        assert left is not None
        assert 29 < left <= 30  # the turn's end starts it again
        session.detach(a, reason="disconnected")
        assert record(owner, "_hub_lease")["holder"] is None
        assert owner.updates("_hub_lease")[-1]["reason"] == "disconnected"


async def test_the_watch_takes_it_from_an_inactive_holder() -> None:
    async with hub_session(lease_timeout=0.05) as (session, _, _):
        owner, a = Client("c-o"), Client("c-a", role="driver")
        join(session, owner)
        join(session, a)
        session.lease_action(a, "request")
        await until(lambda: record(owner, "_hub_lease")["holder"] is None)
        assert owner.updates("_hub_lease")[-1]["reason"] == "expired"
        assert not session.lease.held_by("c-a")
