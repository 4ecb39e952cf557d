"""``TokenAuthority``: the hub's own tokens and external issuers, every way a token can be
wrong refused with its reason (real PyJWT, real keys from ``cryptography``)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from hub.access.issuers import IssuerConfigError, jwks_json, parse_issuers
from hub.access.keys import key_from_secret
from hub.access.principal import Refusal
from hub.access.tokens import TokenAuthority, parse_duration

SECRET = b"a hub secret that is long enough for HS256 ok"
SHOP_SECRET = "the shop's own secret, also 32 bytes or more"


def _pem(private: Any) -> bytes:
    return bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def authority(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> TokenAuthority:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "rsa.pem").write_bytes(_pem(rsa_key))
    (tmp_path / "jwks.json").write_text(jwks_json({"k1": ec_key.public_key()}))
    issuers = parse_issuers(
        {
            "shop": {"issuer": "https://shop.example", "secret": SHOP_SECRET, "max_role": "owner"},
            "idp": {"issuer": "https://idp.example", "public_key_file": str(tmp_path / "rsa.pem")},
            "sso": {"issuer": "https://sso.example", "jwks_file": str(tmp_path / "jwks.json")},
        },
        default_audience="acp-hub",
        default_leeway=5,
        reserved_iss="acp-hub",
    )
    result = TokenAuthority(key_from_secret(SECRET, "test"), issuers=issuers, leeway=5)
    result.ec_key = ec_key  # type: ignore[attr-defined]
    return result


def claims(base: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "alice", "aud": "acp-hub", "iat": now, "exp": now + 600, **(base or {}), **extra}


def refusal_code(auth: TokenAuthority, token: str) -> str:
    with pytest.raises(Refusal) as info:
        auth.verify(token)
    return info.value.code


def test_the_hub_mints_and_verifies_its_own_tokens(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    auth = authority(tmp_path, rsa_key)
    token = auth.mint(sub="bob", role="approver", ttl=60, sessions=["s-1"], agents=None)
    principal = auth.verify(token)
    assert (principal.sub, principal.role, principal.issuer) == ("bob", "approver", "hub")
    assert principal.may_see("s-1")
    assert not principal.may_see("s-2")
    assert principal.may_start("anything")
    assert principal.role_at_most("owner") == "approver"
    assert principal.role_at_most("viewer") == "viewer"
    plain = auth.verify(auth.mint(sub="carol", role="driver", ttl=60))
    assert plain.sessions is None
    assert plain.agents == frozenset()
    assert not plain.may_start("demo")


def test_every_kind_of_bad_token_is_refused_with_its_reason(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    auth = authority(tmp_path, rsa_key)
    hub = {"iss": "acp-hub", "role": "owner"}
    kid = {"kid": auth.key.kid}
    good = jwt.encode(claims(hub), SECRET, algorithm="HS256", headers=kid)
    assert auth.verify(good).role == "owner"
    cases = {
        "forged signature": jwt.encode(
            claims(hub), b"another secret, also more than 32 bytes", "HS256", headers=kid
        ),
        "expired": jwt.encode(claims(hub, exp=int(time.time()) - 60), SECRET, "HS256", headers=kid),
        "not yet valid": jwt.encode(
            claims(hub, nbf=int(time.time()) + 600), SECRET, "HS256", headers=kid
        ),
        "wrong audience": jwt.encode(claims(hub, aud="other"), SECRET, "HS256", headers=kid),
        "unknown kid": jwt.encode(claims(hub), SECRET, "HS256", headers={"kid": "nope"}),
        "no kid": jwt.encode(claims(hub), SECRET, "HS256"),
        "unknown issuer": jwt.encode(claims(iss="https://evil.example"), SECRET, "HS256"),
        "no exp": jwt.encode(
            {k: v for k, v in claims(hub).items() if k != "exp"}, SECRET, "HS256", headers=kid
        ),
        "bad role": jwt.encode(claims(hub, role="god"), SECRET, "HS256", headers=kid),
        "bad sessions": jwt.encode(claims(hub, sessions="s-1"), SECRET, "HS256", headers=kid),
        "garbage": "not a token at all",
        "empty": "",
        "three dots": "a.b.c",
        "huge": "eyJ" + "A" * 10_000,
    }
    # alg "none": an unsigned token PyJWT refuses to build, so it is assembled by hand.
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", **kid}).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(json.dumps(claims(hub)).encode()).rstrip(b"=")
    cases["alg none"] = f"{header.decode()}.{body.decode()}."
    # HS/RS confusion: an HS256 token "signed" with the RSA issuer's public key.
    public_pem = _pem(rsa_key)
    hs_header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    hs_body = (
        base64.urlsafe_b64encode(json.dumps(claims(iss="https://idp.example")).encode())
        .rstrip(b"=")
        .decode()
    )
    signature = hmac.new(public_pem, f"{hs_header}.{hs_body}".encode(), hashlib.sha256).digest()
    cases["HS/RS confusion"] = (
        f"{hs_header}.{hs_body}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"
    )
    expected = {
        "forged signature": "bad_signature",
        "expired": "expired",
        "not yet valid": "not_yet_valid",
        "wrong audience": "wrong_audience",
        "unknown kid": "unknown_key",
        "no kid": "unknown_key",
        "unknown issuer": "unknown_issuer",
        "no exp": "missing_claim",
        "bad role": "invalid_claims",
        "bad sessions": "invalid_claims",
        "garbage": "malformed",
        "empty": "malformed",
        "three dots": "malformed",
        "huge": "malformed",
        "alg none": "algorithm",
        "HS/RS confusion": "algorithm",
    }
    assert {name: refusal_code(auth, token) for name, token in cases.items()} == expected


def test_external_issuers_hs256_rs256_and_jwks(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    auth = authority(tmp_path, rsa_key)
    shop = jwt.encode(claims(iss="https://shop.example", role="owner"), SHOP_SECRET, "HS256")
    principal = auth.verify(shop)
    # An external principal lives in its issuer's namespace.
    assert (principal.sub, principal.issuer, principal.role) == ("shop:alice", "shop", "owner")
    idp = jwt.encode(claims(iss="https://idp.example", role="owner"), rsa_key, "RS256")
    # The issuer's max_role (default driver) caps the role its tokens grant.
    assert auth.verify(idp).role == "driver"
    ec_key = auth.ec_key  # type: ignore[attr-defined]
    sso = jwt.encode(claims(iss="https://sso.example"), ec_key, "ES256", headers={"kid": "k1"})
    assert auth.verify(sso).sub == "sso:alice"
    unknown = jwt.encode(claims(iss="https://sso.example"), ec_key, "ES256", headers={"kid": "k9"})
    assert refusal_code(auth, unknown) == "unknown_key"
    no_kid = jwt.encode(claims(iss="https://sso.example"), ec_key, "ES256")
    assert refusal_code(auth, no_kid) == "unknown_key"
    wrong_iss_aud = jwt.encode(
        claims(iss="https://idp.example", aud="someone-else"), rsa_key, "RS256"
    )
    assert refusal_code(auth, wrong_iss_aud) == "wrong_audience"
    # The shop's secret does not make a token of the hub's.
    forged = jwt.encode(
        claims(iss="acp-hub", role="owner"), SHOP_SECRET, "HS256", headers={"kid": auth.key.kid}
    )
    assert refusal_code(auth, forged) == "bad_signature"
    # An Ed25519 key is only EdDSA.
    ed = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "ed.pem").write_bytes(_pem(ed))
    issuers = parse_issuers(
        {"ed": {"issuer": "ed", "public_key_file": str(tmp_path / "ed.pem")}},
        default_audience="acp-hub",
        default_leeway=0,
        reserved_iss="acp-hub",
    )
    assert issuers["ed"].algorithms == frozenset({"EdDSA"})


def test_issuer_definitions_that_cannot_work_are_refused(tmp_path: Path) -> None:
    def parse(table: dict[str, Any]) -> None:
        parse_issuers(
            {"x": table}, default_audience="acp-hub", default_leeway=0, reserved_iss="acp-hub"
        )

    bad: list[dict[str, Any]] = [
        {"secret": SHOP_SECRET},  # no issuer
        {"issuer": "x", "secret": "short"},
        {"issuer": "x"},  # no key
        {"issuer": "x", "secret": SHOP_SECRET, "public_key_file": "/nope"},
        {"issuer": "x", "public_key_file": str(tmp_path / "missing.pem")},
        {"issuer": "acp-hub", "secret": SHOP_SECRET},  # the hub's own iss
        {"issuer": "x", "secret": SHOP_SECRET, "algorithms": ["RS256"]},
        {"issuer": "x", "secret_env": "ACP_HUB_TEST_UNSET_VARIABLE"},
        {"issuer": "x", "secret": SHOP_SECRET, "colour": "blue"},
        {"issuer": "x", "secret": SHOP_SECRET, "max_role": "god"},
    ]
    for table in bad:
        with pytest.raises(IssuerConfigError):
            parse(table)


def test_durations() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("30m") == 1800
    assert parse_duration("2h") == 7200
    assert parse_duration("7d") == 7 * 86400
    for text in ("", "soon", "-1h", "0", "nanh", "infm"):
        with pytest.raises(ValueError, match="duration"):
            parse_duration(text)
