"""Connection caps in total, per address and per principal."""

from __future__ import annotations

import pytest

from hub.access.principal import Refusal
from hub.server.admission import ConnectionCaps


def refusal(caps: ConnectionCaps, address: str, principal: str | None) -> Refusal:
    with pytest.raises(Refusal) as caught:
        caps.admit(address, principal)
    return caught.value


def test_caps_apply_and_release_gives_the_place_back() -> None:
    caps = ConnectionCaps(total=3, per_address=2, per_principal=2)
    a1 = caps.admit("10.0.0.1", "alice")
    caps.admit("10.0.0.1", "bob")
    third = refusal(caps, "10.0.0.1", "carol")
    assert (third.status, third.code) == (429, "max_connections_per_address")
    caps.admit("10.0.0.2", "alice")
    full = refusal(caps, "10.0.0.3", "dave")
    assert (full.status, full.code) == (503, "max_connections")
    a1.release()
    a1.release()  # idempotent: releasing twice frees one place only
    assert caps.open == 2
    caps.admit("10.0.0.1", "carol")
    assert refusal(caps, "10.0.0.4", "erin").code == "max_connections"


def test_the_principal_cap_spans_addresses() -> None:
    caps = ConnectionCaps(total=0, per_address=0, per_principal=2)
    caps.admit("a", "alice")
    caps.admit("b", "alice")
    assert refusal(caps, "c", "alice").code == "max_connections_per_principal"
    # No credential: only the address and total caps apply.
    for _ in range(50):
        caps.admit("d", None)


def test_released_addresses_leave_no_entries_behind() -> None:
    caps = ConnectionCaps(total=0, per_address=1, per_principal=1)
    for n in range(1000):
        caps.admit(f"10.0.{n // 256}.{n % 256}", f"p{n}").release()
    assert caps.open == 0
    assert not caps._by_address
    assert not caps._by_principal
