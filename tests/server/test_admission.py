"""Connection caps in total, per address and per principal."""

from __future__ import annotations

from hub.server.admission import Admission, Refusal, Ticket


def test_caps_apply_and_release_gives_the_place_back() -> None:
    admission = Admission(total=3, per_address=2, per_principal=2)
    a1 = admission.admit("10.0.0.1", "alice")
    a2 = admission.admit("10.0.0.1", "bob")
    assert isinstance(a1, Ticket)
    assert isinstance(a2, Ticket)
    third = admission.admit("10.0.0.1", "carol")
    assert isinstance(third, Refusal)
    assert (third.status, third.limit) == (429, "max_connections_per_address")
    b1 = admission.admit("10.0.0.2", "alice")
    assert isinstance(b1, Ticket)
    full = admission.admit("10.0.0.3", "dave")
    assert isinstance(full, Refusal)
    assert (full.status, full.limit) == (503, "max_connections")
    a1.release()
    a1.release()  # idempotent: releasing twice frees one place only
    assert admission.open == 2
    assert isinstance(admission.admit("10.0.0.1", "carol"), Ticket)
    assert isinstance(admission.admit("10.0.0.4", "erin"), Refusal)


def test_the_principal_cap_spans_addresses() -> None:
    admission = Admission(total=0, per_address=0, per_principal=2)
    assert isinstance(admission.admit("a", "alice"), Ticket)
    assert isinstance(admission.admit("b", "alice"), Ticket)
    refused = admission.admit("c", "alice")
    assert isinstance(refused, Refusal)
    assert refused.limit == "max_connections_per_principal"
    # No credential: only the address and total caps apply.
    assert all(isinstance(admission.admit("d", None), Ticket) for _ in range(50))


def test_released_addresses_leave_no_entries_behind() -> None:
    admission = Admission(total=0, per_address=1, per_principal=1)
    for n in range(1000):
        ticket = admission.admit(f"10.0.{n // 256}.{n % 256}", f"p{n}")
        assert isinstance(ticket, Ticket)
        ticket.release()
    assert admission.open == 0
    assert not admission._by_address
    assert not admission._by_principal
