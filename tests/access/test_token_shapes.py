"""Tokens of every shape: whatever JSON a token's header and claims hold, signed with the
right key or not, ``TokenAuthority.verify`` answers a principal or a ``Refusal``, never
another exception (property-tested with hypothesis over arbitrary JSON)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub.access.issuers import parse_issuers
from hub.access.keys import key_from_secret
from hub.access.principal import Principal, Refusal
from hub.access.tokens import TokenAuthority

SECRET = b"a hub secret that is long enough for HS256 ok"
SHOP_SECRET = "the shop's own secret, also 32 bytes or more"
KEY = key_from_secret(SECRET, "tests")
AUTHORITY = TokenAuthority(
    KEY,
    leeway=5,
    issuers=parse_issuers(
        {"shop": {"issuer": "https://shop.example", "secret": SHOP_SECRET}},
        default_audience="acp-hub",
        default_leeway=5,
        reserved_iss="acp-hub",
    ),
)

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


def _part(value: Any) -> str:
    raw = json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _token(header: Any, claims: Any, secret: bytes | None) -> str:
    signing_input = f"{_part(header)}.{_part(claims)}"
    if secret is None:
        signature = b"not a signature"
    else:
        signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def _claim(known: list[Any]) -> st.SearchStrategy[Any]:
    """A claim's value: one that passes (so the checks after it are reached) or any JSON."""
    return st.sampled_from(known) | JSON


def _claims() -> st.SearchStrategy[dict[str, Any]]:
    now = int(time.time())
    optional = {
        "iss": _claim(["acp-hub", "https://shop.example"]),
        "aud": _claim(["acp-hub", ["acp-hub", "x"]]),
        "sub": _claim(["alice"]),
        "exp": _claim([now + 600, now - 600, float(now + 600)]),
        "nbf": _claim([now - 10, now + 600]),
        "iat": _claim([now]),
        "role": _claim(["viewer", "owner"]),
        "name": _claim(["Alice"]),
        "sessions": _claim(["*", ["s-1"]]),
        "agents": _claim(["*", ["demo"]]),
        "origins": _claim([["https://a.example"]]),
        "lnk": _claim(["l-1"]),
        "jti": _claim(["j-1"]),
    }
    return st.fixed_dictionaries({}, optional=optional).flatmap(
        lambda fixed: st.dictionaries(st.text(max_size=5), JSON, max_size=3).map(
            lambda extra: {**extra, **fixed}
        )
    )


def _headers() -> st.SearchStrategy[Any]:
    optional = {
        "alg": _claim(["HS256", "none", "RS256", "HS512"]),
        "kid": _claim([KEY.kid, "other"]),
        "typ": _claim(["JWT"]),
        "crit": _claim([["b64"], []]),
        "b64": _claim([False, True]),
    }
    return st.fixed_dictionaries({}, optional=optional) | JSON


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=_headers(),
    claims=_claims() | JSON,
    secret=st.sampled_from([SECRET, SHOP_SECRET.encode(), None]),
)
def test_any_header_and_claims_give_a_principal_or_a_refusal(
    header: Any, claims: Any, secret: bytes | None
) -> None:
    token = _token(header, claims, secret)
    outcome: Principal | Refusal
    try:
        outcome = AUTHORITY.verify(token)
    except Refusal as refusal:
        outcome = refusal
    if isinstance(outcome, Refusal):
        assert outcome.status == 401
        assert outcome.code
        assert outcome.message
        return
    principal = outcome
    assert isinstance(principal.sub, str)
    assert principal.expires_at is None or isinstance(principal.expires_at, int)


@pytest.mark.parametrize(
    ("claim", "value"),
    [
        ("iss", ["acp-hub"]),
        ("iss", {"acp-hub": 1}),
        ("sub", 7),
        ("exp", "soon"),
        ("exp", float("inf")),
        ("exp", 10**400),
        ("exp", True),
        ("nbf", []),
        ("aud", {"a": 1}),
        ("aud", [1]),
        ("jti", []),
        ("name", ["Alice"]),
        ("role", ["owner"]),
    ],
)
def test_a_claim_of_the_wrong_type_is_refused_before_it_is_used(claim: str, value: Any) -> None:
    now = int(time.time())
    body = {"iss": "acp-hub", "aud": "acp-hub", "sub": "x", "exp": now + 60, claim: value}
    with pytest.raises(Refusal) as info:
        AUTHORITY.verify(_token({"alg": "HS256", "kid": KEY.kid}, body, SECRET))
    assert info.value.code == "invalid_claims"
    assert f'"{claim}"' in info.value.message


def test_a_null_name_is_shown_as_the_sub() -> None:
    now = int(time.time())
    body = {"iss": "acp-hub", "aud": "acp-hub", "sub": "x", "exp": now + 60, "name": None}
    principal = AUTHORITY.verify(_token({"alg": "HS256", "kid": KEY.kid}, body, SECRET))
    assert principal.name == "x"
