"""Protocol version negotiation, both as client (towards agents) and as agent."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol.errors import PeerError, VersionError
from hub.protocol.version import (
    LATEST,
    SUPPORTED,
    Choice,
    accept,
    negotiate_as_agent,
    offer,
    parse_choice,
)


def test_constants() -> None:
    assert LATEST == 2
    assert SUPPORTED == (1, 2)
    assert issubclass(VersionError, PeerError)


@pytest.mark.parametrize(("choice", "expected"), [("auto", 2), (1, 1), (2, 2)])
def test_offer(choice: Choice, expected: int) -> None:
    assert offer(choice) == expected


@pytest.mark.parametrize(
    ("choice", "answered", "expected"),
    [("auto", 2, 2), ("auto", 1, 1), (2, 2, 2), (1, 1, 1)],
)
def test_accept_valid_answers(choice: Choice, answered: int, expected: int) -> None:
    assert accept(offer(choice), answered, choice) == expected


@pytest.mark.parametrize(
    ("choice", "answered", "match"),
    [
        ("auto", 3, "supported"),
        ("auto", 0, "supported"),
        ("auto", "2", "supported"),
        ("auto", True, "supported"),
        ("auto", None, "supported"),
        ("auto", 2.0, "supported"),
        (1, 2, "newer"),
        (2, 1, "configured 2"),
    ],
)
def test_accept_refuses(choice: Choice, answered: object, match: str) -> None:
    with pytest.raises(VersionError, match=match):
        accept(offer(choice), answered, choice)


def test_accept_refuses_answer_newer_than_offered_even_on_auto() -> None:
    with pytest.raises(VersionError, match="newer"):
        accept(1, 2, "auto")


@pytest.mark.parametrize(
    ("requested", "max_version", "expected"),
    [(1, 2, 1), (2, 2, 2), (3, 2, 2), (10**6, 2, 2), (2, 1, 1), (1, 1, 1)],
)
def test_negotiate_as_agent(requested: int, max_version: int, expected: int) -> None:
    assert negotiate_as_agent(requested, max_version) == expected


def test_negotiate_as_agent_defaults_to_latest() -> None:
    assert negotiate_as_agent(99) == LATEST


@pytest.mark.parametrize("requested", [0, -1, None, "2", True, False, 1.0, [2], {}])
def test_negotiate_as_agent_refuses(requested: object) -> None:
    with pytest.raises(VersionError, match="protocolVersion"):
        negotiate_as_agent(requested)


def test_negotiate_as_agent_checks_its_own_maximum() -> None:
    with pytest.raises(ValueError, match="max_version"):
        negotiate_as_agent(1, 3)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("auto", "auto"), (" AUTO ", "auto"), ("1", 1), ("2", 2), (1, 1), (2, 2)],
)
def test_parse_choice(value: str | int, expected: Choice) -> None:
    assert parse_choice(value) == expected


@pytest.mark.parametrize("value", ["3", "0", "", "v2", 3, True, "latest"])
def test_parse_choice_refuses(value: str | int) -> None:
    with pytest.raises(ValueError, match="protocol must be"):
        parse_choice(value)


@given(st.integers(min_value=1), st.sampled_from(SUPPORTED))
def test_agent_answer_is_always_acceptable_to_an_auto_client(requested: int, hub_max: int) -> None:
    """The hub as agent and the hub as client agree with each other."""
    offered = min(requested, LATEST)
    answer = negotiate_as_agent(offered, hub_max)
    assert answer in SUPPORTED
    assert accept(offered, answer, "auto") == answer
