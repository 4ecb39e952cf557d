"""External token issuers, configured by name (``[hub.issuers.NAME]``).

An application backend mints tokens for its users (a widget on its pages, say) without ever
talking to the hub: the hub only needs to know how to check them. Each issuer names the
``iss`` its tokens carry and exactly one key source:

- ``secret`` or ``secret_env`` (HS256, at least 32 bytes);
- ``public_key_file``: a PEM public key (RSA: RS256; EC: ES256/ES384/ES512 by curve;
  Ed25519/Ed448: EdDSA);
- ``jwks_file``: a JSON Web Key Set (public keys only); tokens must name their key by
  ``kid``.

Optional: ``audience`` (default the ``token_audience`` setting), ``algorithms`` (default:
what the key type allows; an HMAC algorithm is never accepted with a public key, which is
what stops HS/RS algorithm confusion), ``leeway`` (seconds of clock skew), ``max_role``
(the highest role its tokens may grant; default ``driver``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from hub.access.keys import MIN_SECRET_BYTES
from hub.settings import ROLES, Role

HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
PUBLIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
_KEYS = {
    "issuer",
    "audience",
    "algorithms",
    "secret",
    "secret_env",
    "public_key_file",
    "jwks_file",
    "leeway",
    "max_role",
}


class IssuerConfigError(ValueError):
    """An issuer definition that cannot work; the message names the issuer and the key."""


@dataclass(frozen=True)
class Issuer:
    """One way to check tokens: the hub itself or an external issuer.

    ``keys`` maps a ``kid`` to a key object PyJWT accepts (``""`` when the issuer has one key
    and tokens need not name it); ``algorithms`` is the allow-list checked before any
    signature work.
    """

    name: str
    iss: str
    audience: str
    algorithms: frozenset[str]
    keys: Mapping[str, Any] = field(repr=False)
    leeway: float = 30.0
    max_role: Role = "owner"
    require_kid: bool = False


def _algorithms_for_public_key(key: Any) -> frozenset[str]:
    if isinstance(key, rsa.RSAPublicKey):
        return frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
    if isinstance(key, ec.EllipticCurvePublicKey):
        by_curve = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
        alg = by_curve.get(key.curve.name)
        return frozenset({alg}) if alg else frozenset()
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return frozenset({"EdDSA"})
    return frozenset()


def parse_issuer(
    name: str,
    table: Any,
    *,
    default_audience: str,
    default_leeway: float,
    environ: Mapping[str, str] = os.environ,
) -> Issuer:
    """Build an ``Issuer`` from its config table; ``IssuerConfigError`` on any problem."""
    where = f"issuer {name!r}"
    if not isinstance(table, Mapping):
        raise IssuerConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise IssuerConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    iss = table.get("issuer")
    if not isinstance(iss, str) or not iss:
        raise IssuerConfigError(f"{where}: issuer (the tokens' iss) is required")
    audience = table.get("audience", default_audience)
    if not isinstance(audience, str) or not audience:
        raise IssuerConfigError(f"{where}: audience must be a non-empty string")
    leeway = table.get("leeway", default_leeway)
    if not isinstance(leeway, int | float) or isinstance(leeway, bool) or leeway < 0:
        raise IssuerConfigError(f"{where}: leeway must be a number of seconds >= 0")
    max_role = table.get("max_role", "driver")
    if max_role not in ROLES:
        raise IssuerConfigError(f"{where}: max_role must be one of {', '.join(ROLES)}")
    sources = [k for k in ("secret", "secret_env", "public_key_file", "jwks_file") if k in table]
    if len(sources) != 1:
        raise IssuerConfigError(
            f"{where}: exactly one of secret, secret_env, public_key_file, jwks_file is needed"
        )
    source = sources[0]
    keys: dict[str, Any] = {}
    require_kid = False
    if source in ("secret", "secret_env"):
        if source == "secret":
            raw = table["secret"]
        else:
            raw = environ.get(str(table["secret_env"]), "")
            if not raw:
                raise IssuerConfigError(f"{where}: ${table['secret_env']} is not set")
        if not isinstance(raw, str) or len(raw.encode()) < MIN_SECRET_BYTES:
            raise IssuerConfigError(f"{where}: the secret must be at least 32 bytes")
        keys[""] = raw.encode()
        allowed = frozenset({"HS256"})
    elif source == "public_key_file":
        path = Path(str(table["public_key_file"])).expanduser()
        try:
            key = load_pem_public_key(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise IssuerConfigError(f"{where}: public_key_file {path}: {exc}") from None
        allowed = _algorithms_for_public_key(key)
        if not allowed:
            raise IssuerConfigError(f"{where}: unsupported public key type in {path}")
        keys[""] = key
    else:
        path = Path(str(table["jwks_file"])).expanduser()
        try:
            jwks = jwt.PyJWKSet.from_json(path.read_text())
        except (OSError, ValueError, jwt.PyJWTError) as exc:
            raise IssuerConfigError(f"{where}: jwks_file {path}: {exc}") from None
        allowed = frozenset()
        for jwk in jwks.keys:
            if not jwk.key_id:
                raise IssuerConfigError(f"{where}: every key of {path} needs a kid")
            if jwk.algorithm_name in HMAC_ALGORITHMS or jwk.key_type == "oct":
                raise IssuerConfigError(f"{where}: {path} may hold public keys only")
            keys[jwk.key_id] = jwk
            allowed |= {jwk.algorithm_name}
        require_kid = True
    configured = table.get("algorithms")
    if configured is not None:
        if not isinstance(configured, list) or not all(isinstance(a, str) for a in configured):
            raise IssuerConfigError(f"{where}: algorithms must be a list of names")
        wrong = sorted(set(configured) - allowed)
        if wrong:
            raise IssuerConfigError(
                f"{where}: algorithm(s) {', '.join(wrong)} do not fit its key "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
        allowed = frozenset(configured)
    return Issuer(
        name=name,
        iss=iss,
        audience=audience,
        algorithms=allowed,
        keys=keys,
        leeway=float(leeway),
        max_role=max_role,
        require_kid=require_kid,
    )


def parse_issuers(
    tables: Mapping[str, Any],
    *,
    default_audience: str,
    default_leeway: float,
    reserved_iss: str,
    environ: Mapping[str, str] = os.environ,
) -> dict[str, Issuer]:
    """Every configured issuer by its ``iss``; two issuers (or one and the hub) may not
    share an ``iss``, or a token could be checked against the wrong key."""
    by_iss: dict[str, Issuer] = {}
    for name, table in tables.items():
        issuer = parse_issuer(
            name,
            table,
            default_audience=default_audience,
            default_leeway=default_leeway,
            environ=environ,
        )
        if issuer.iss == reserved_iss or issuer.iss in by_iss:
            raise IssuerConfigError(f"issuer {name!r}: iss {issuer.iss!r} is already in use")
        by_iss[issuer.iss] = issuer
    return by_iss


def jwks_json(keys: Mapping[str, Any]) -> str:
    """A JWKS document for public ``keys`` by kid (tests and docs use it)."""
    entries = []
    for kid, key in keys.items():
        algorithm = next(iter(_algorithms_for_public_key(key)))
        jwk = json.loads(jwt.get_algorithm_by_name(algorithm).to_jwk(key))
        entries.append({**jwk, "kid": kid, "use": "sig"})
    return json.dumps({"keys": entries})
