"""The error tree and RpcError, with a named constructor per code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol import errors
from hub.protocol.errors import (
    InvalidMessage,
    InvalidParams,
    LineTooLong,
    LocalError,
    ParseError,
    PeerError,
    ProtocolError,
    RpcError,
    TranslationError,
    VersionError,
)


def test_error_tree() -> None:
    for cls in (LineTooLong, ParseError, InvalidMessage, InvalidParams, VersionError):
        assert issubclass(cls, PeerError)
        assert not issubclass(cls, LocalError)
    assert issubclass(TranslationError, LocalError)
    assert not issubclass(TranslationError, PeerError)
    assert issubclass(PeerError, ProtocolError)
    assert issubclass(LocalError, ProtocolError)


def test_line_too_long_carries_length_and_limit() -> None:
    err = LineTooLong(11, 10)
    assert (err.length, err.limit) == (11, 10)
    assert "11" in str(err)
    assert "10" in str(err)


def test_codes_are_the_schema_and_hub_values() -> None:
    assert (errors.PARSE_ERROR, errors.INVALID_REQUEST, errors.METHOD_NOT_FOUND) == (
        -32700,
        -32600,
        -32601,
    )
    assert (errors.INVALID_PARAMS, errors.INTERNAL_ERROR, errors.REQUEST_CANCELLED) == (
        -32602,
        -32603,
        -32800,
    )
    assert (errors.AUTH_REQUIRED, errors.RESOURCE_NOT_FOUND) == (-32000, -32002)
    hub_codes = [
        errors.FORBIDDEN,
        errors.SESSION_BUSY,
        errors.AGENT_UNAVAILABLE,
        errors.SESSION_LOST,
        errors.RATE_LIMITED,
        errors.NOT_LEASE_HOLDER,
        errors.QUEUE_FULL,
        errors.NOT_ATTACHED,
        errors.UNSUPPORTED,
        errors.STALE_ANSWER,
        errors.LIMIT_REACHED,
        errors.NOT_OWNER,
        errors.STORE_UNAVAILABLE,
    ]
    assert len(set(hub_codes)) == len(hub_codes)
    assert all(-32059 <= c <= -32040 for c in hub_codes)


@pytest.mark.parametrize(
    ("make", "code", "message"),
    [
        (errors.parse_error, -32700, "Parse error"),
        (errors.invalid_request, -32600, "Invalid request"),
        (errors.invalid_params, -32602, "Invalid params"),
        (errors.internal_error, -32603, "Internal error"),
        (errors.request_cancelled, -32800, "Request cancelled"),
        (errors.auth_required, -32000, "Authentication required"),
        (errors.resource_not_found, -32002, "Resource not found"),
    ],
)
def test_detail_constructors(make: Callable[..., RpcError], code: int, message: str) -> None:
    bare = make()
    assert (bare.code, bare.message, bare.data) == (code, message, None)
    assert bare.to_dict() == {"code": code, "message": message}
    detailed = make("why")
    assert (detailed.code, detailed.data) == (code, "why")
    assert detailed.to_dict() == {"code": code, "message": message, "data": "why"}


def test_method_not_found_names_the_method() -> None:
    err = errors.method_not_found("_x/y")
    assert err == RpcError(-32601, "Method not found", {"method": "_x/y"})


def test_hub_error() -> None:
    err = errors.hub_error(errors.SESSION_BUSY, "busy", {"sessionId": "s"})
    assert err.to_dict() == {"code": -32041, "message": "busy", "data": {"sessionId": "s"}}
    assert errors.hub_error(errors.QUEUE_FULL, "full").to_dict() == {
        "code": -32046,
        "message": "full",
    }


def test_forbidden_names_the_missing_role() -> None:
    err = errors.forbidden("prompter", "observer", "session/prompt")
    assert err.code == errors.FORBIDDEN
    assert "'prompter'" in err.message
    assert "'observer'" in err.message
    assert err.data == {"needed": "prompter", "role": "observer", "action": "session/prompt"}


def test_from_dict_well_formed() -> None:
    obj = {"code": -32602, "message": "bad", "data": [1]}
    assert RpcError.from_dict(obj) == RpcError(-32602, "bad", [1])
    assert RpcError.from_dict(obj).to_dict() == obj


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({}, RpcError(errors.INTERNAL_ERROR, "error")),
        ({"code": "1", "message": 5}, RpcError(errors.INTERNAL_ERROR, "error")),
        ({"code": True, "message": "m"}, RpcError(errors.INTERNAL_ERROR, "m")),
        ({"code": 1.5, "message": "m"}, RpcError(errors.INTERNAL_ERROR, "m")),
        ({"code": 7}, RpcError(7, "error")),
        ("boom", RpcError(errors.INTERNAL_ERROR, "malformed error object", "boom")),
        (None, RpcError(errors.INTERNAL_ERROR, "malformed error object", None)),
        ([1], RpcError(errors.INTERNAL_ERROR, "malformed error object", [1])),
    ],
)
def test_from_dict_tolerates_malformed_objects(obj: Any, expected: RpcError) -> None:
    assert RpcError.from_dict(obj) == expected


@given(st.integers(-(2**31), 2**31 - 1), st.text(), st.none() | st.text() | st.integers())
def test_to_dict_from_dict_round_trip(code: int, message: str, data: Any) -> None:
    err = RpcError(code, message, data)
    assert RpcError.from_dict(err.to_dict()) == err


def test_rpc_failure_carries_its_error() -> None:
    error = errors.hub_error(errors.QUEUE_FULL, "Queue full", {"limit": 2})
    failure = errors.RpcFailure(error)
    assert failure.error is error
    assert failure.code == errors.QUEUE_FULL
    assert str(failure) == "Queue full (-32046)"
    assert not issubclass(errors.RpcFailure, errors.ProtocolError)
