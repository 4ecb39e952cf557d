"""``TokenAuthority``: mint the hub's own JWTs and verify every credential.

Verification, in this order, each failure a ``Refusal`` with a reason the UI can show:

1. the token parses as a JWS (``malformed``);
2. every registered claim it carries has the type RFC 7519 gives it (``iss``, ``sub`` and
   ``jti`` strings, ``aud`` a string or a list of strings, ``exp``/``nbf``/``iat`` finite
   numbers) and every hub claim its own (``invalid_claims``), before any claim is used:
   this is checked on the unverified claims, so a token of any shape, signed or not, is a
   refusal and never an error of the hub's;
3. its ``iss`` names the hub or a configured issuer (``unknown_issuer``), whose algorithm
   allow-list contains the header's ``alg`` (``algorithm``: this refuses ``alg: none`` and
   HS/RS confusion before any key is touched);
4. its ``kid`` names a key of that issuer (``unknown_key``; the hub's own tokens carry the
   key's id, so a token of a previous key is told apart from a forgery);
5. PyJWT checks the signature (``bad_signature``, in constant time), ``exp`` (``expired``),
   ``nbf`` (``not_yet_valid``), ``aud`` (``wrong_audience``), ``iss`` (``wrong_issuer``) with
   the issuer's leeway, and that ``exp`` and ``sub`` are present (``missing_claim``);
6. the claims have the right shapes (``invalid_claims``).

Nothing but a ``Refusal`` leaves ``verify``, whatever the token (tests/access property-test
it over arbitrary JSON headers and claims).

Claims (all but ``sub`` and ``exp`` optional): ``sub`` (the principal), ``name`` (shown to
others; default the ``sub``), ``role`` (the ceiling; default ``viewer``; capped by the
issuer's ``max_role``), ``sessions`` (ids or ``"*"``; default ``"*"``), ``agents`` (agent
names or ``"*"`` that ``session/new`` may start; default none), ``origins`` (browser origins
an embed token may be used from), ``jti``, ``lnk`` (the share link a hub token belongs to).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping
from typing import Any

import jwt

from hub.access.issuers import Issuer
from hub.access.keys import HubKey
from hub.access.principal import MAX_NAME, Principal, Refusal
from hub.settings import ROLES, Role, role_rank

HUB_ALGORITHM = "HS256"
MAX_TOKEN_BYTES = 8192
MAX_LIST = 1000
MAX_TIME = 1e15
"""No NumericDate reaches it (about 31 million years): beyond, a claim is refused."""


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``90``, ``90s``, ``30m``, ``2h``, ``7d``; ``ValueError`` else."""
    value = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    factor = 1
    if value and value[-1] in units:
        factor = units[value[-1]]
        value = value[:-1]
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 2h, 7d)") from None
    if number <= 0 or number != number or number == float("inf"):
        raise ValueError(f"a duration must be positive: {text!r}")
    return number * factor


_STRING_CLAIMS = ("iss", "sub", "jti", "name", "role", "lnk")
_TIME_CLAIMS = ("exp", "nbf", "iat")


def _is_time(value: Any) -> bool:
    """Whether ``value`` is a NumericDate: a number (not a boolean) within a range any clock
    reaches (NaN and the infinities compare false)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return -MAX_TIME < value < MAX_TIME


def check_claim_types(claims: Mapping[str, Any]) -> None:
    """``Refusal("invalid_claims")`` unless every claim the hub reads has its type: run on
    the unverified claims, before any of them is used (a lookup keyed by an array ``iss``
    would raise instead of refusing)."""
    for key in _STRING_CLAIMS:
        if key == "name" and claims.get(key) is None:
            continue  # a user without a display name: shown by its `sub`
        if key in claims and not isinstance(claims[key], str):
            raise Refusal("invalid_claims", f'the "{key}" claim must be a string')
    for key in _TIME_CLAIMS:
        if key in claims and not _is_time(claims[key]):
            raise Refusal("invalid_claims", f'the "{key}" claim must be a number of seconds')
    aud = claims.get("aud")
    if aud is not None and not (
        isinstance(aud, str)
        or (isinstance(aud, list) and len(aud) <= MAX_LIST and all(isinstance(a, str) for a in aud))
    ):
        raise Refusal("invalid_claims", 'the "aud" claim must be a string or a list of strings')


def _id_set(claims: Mapping[str, Any], key: str, default: frozenset[str] | None) -> Any:
    """A ``sessions``/``agents`` claim as ``None`` ("*") or a frozen set; ``default`` when
    the claim is absent."""
    if key not in claims:
        return default
    value = claims[key]
    if value == "*":
        return None
    if (
        not isinstance(value, list)
        or len(value) > MAX_LIST
        or not all(isinstance(v, str) and 0 < len(v) <= 256 for v in value)
    ):
        raise Refusal("invalid_claims", f'the "{key}" claim must be "*" or a list of names')
    return frozenset(value)


# Why ``jwt.decode`` refused a token (but for a missing claim, which names it), in the order
# its errors are told apart: the first class the error is wins; any other is "malformed".
_DECODE_REFUSALS: tuple[tuple[type[jwt.PyJWTError], str, str], ...] = (
    (jwt.ExpiredSignatureError, "expired", "the token has expired"),
    (jwt.ImmatureSignatureError, "not_yet_valid", "the token is not valid yet"),
    (jwt.InvalidAudienceError, "wrong_audience", "the token is meant for another audience"),
    (jwt.InvalidIssuerError, "wrong_issuer", "the token's issuer does not match"),
    (jwt.InvalidSignatureError, "bad_signature", "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, "algorithm", "the algorithm is not accepted"),
)


def _decode_refusal(exc: jwt.PyJWTError) -> Refusal:
    """The ``Refusal`` for ``exc``, an error of ``jwt.decode``."""
    for kind, reason, message in _DECODE_REFUSALS:
        if isinstance(exc, kind):
            return Refusal(reason, message)
    return Refusal("malformed", "the token could not be verified")


class TokenAuthority:
    """Mints the hub's tokens with ``key`` and verifies the hub's and ``issuers``' tokens."""

    def __init__(
        self,
        key: HubKey,
        *,
        iss: str = "acp-hub",
        audience: str = "acp-hub",
        leeway: float = 30.0,
        issuers: Mapping[str, Issuer] | None = None,
    ) -> None:
        self.key = key
        self.hub = Issuer(
            name="hub",
            iss=iss,
            audience=audience,
            algorithms=frozenset({HUB_ALGORITHM}),
            keys={key.kid: key.secret},
            leeway=leeway,
            max_role="owner",
            require_kid=False,
        )
        self.issuers = dict(issuers or {})

    # -- minting -----------------------------------------------------------------------------

    def mint(
        self,
        *,
        sub: str,
        role: Role,
        ttl: float,
        name: str | None = None,
        sessions: Iterable[str] | None = None,
        agents: Iterable[str] | None = (),
        origins: Iterable[str] = (),
        jti: str | None = None,
        link_id: str | None = None,
        now: float | None = None,
    ) -> str:
        """A hub-signed token. ``sessions=None`` / ``agents=None`` mean ``"*"``; ``ttl`` is
        the lifetime in seconds."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}")
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "iss": self.hub.iss,
            "aud": self.hub.audience,
            "sub": sub,
            "role": role,
            "iat": issued,
            "nbf": issued,
            "exp": issued + max(1, int(ttl)),
            "jti": jti or secrets.token_urlsafe(12),
            "sessions": "*" if sessions is None else sorted(sessions),
            "agents": "*" if agents is None else sorted(agents),
        }
        if name:
            claims["name"] = name[:MAX_NAME]
        origins = list(origins)
        if origins:
            claims["origins"] = origins
        if link_id is not None:
            claims["lnk"] = link_id
        return jwt.encode(
            claims, self.key.secret, algorithm=HUB_ALGORITHM, headers={"kid": self.key.kid}
        )

    # -- verifying ---------------------------------------------------------------------------

    def verify(self, token: str) -> Principal:
        """The principal ``token`` proves, or a ``Refusal`` (see the module docstring).
        Share-link state (revoked, used up) is checked by the caller (``hub.access.gate``)."""
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_BYTES:
            raise Refusal("malformed", "the token is empty or too long")
        try:
            return self._verify(token)
        except Refusal:
            raise
        except (TypeError, ValueError, OverflowError, KeyError, AttributeError):
            # A shape no check above foresaw (PyJWT's own parsing included): still the
            # client's token, so a refusal, never a traceback before authentication.
            raise Refusal("malformed", "the token could not be read") from None

    def _verify(self, token: str) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise Refusal("malformed", "the token is not a well-formed JWT") from None
        if not isinstance(header, dict) or not isinstance(unverified, dict):
            raise Refusal("malformed", "the token is not a well-formed JWT")
        check_claim_types(unverified)
        iss = unverified.get("iss")
        issuer = self.hub if iss == self.hub.iss else self.issuers.get(str(iss))
        if issuer is None:
            raise Refusal("unknown_issuer", "the token's issuer is not one this hub trusts")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in issuer.algorithms:
            raise Refusal("algorithm", f"the algorithm {str(alg)[:16]!r} is not accepted")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise Refusal("unknown_key", "the token's key id is not a string")
        if issuer is self.hub or issuer.require_kid:
            if kid is None and issuer.require_kid:
                raise Refusal("unknown_key", "the token does not name its key (kid)")
            if kid is None or kid not in issuer.keys:
                raise Refusal("unknown_key", "the token was signed by a key this hub does not know")
            key = issuer.keys[kid]
        else:
            key = issuer.keys[""]
        if isinstance(key, jwt.PyJWK):
            if key.algorithm_name != alg:
                raise Refusal("algorithm", "the algorithm does not match the key")
            key = key.key
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=issuer.audience,
                issuer=issuer.iss,
                leeway=issuer.leeway,
                options={"require": ["exp", "sub", "iss", "aud"]},
            )
        except jwt.MissingRequiredClaimError as exc:
            raise Refusal("missing_claim", f'the token has no "{exc.claim}" claim') from None
        except jwt.PyJWTError as exc:
            raise _decode_refusal(exc) from None
        return self._principal(claims, issuer)

    def _principal(self, claims: Mapping[str, Any], issuer: Issuer) -> Principal:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub or len(sub) > 256:
            raise Refusal("invalid_claims", 'the "sub" claim must be a non-empty string')
        role = claims.get("role", "viewer")
        if role not in ROLES:
            raise Refusal("invalid_claims", f'the "role" claim must be one of {", ".join(ROLES)}')
        if role_rank(role) > role_rank(issuer.max_role):
            role = issuer.max_role
        name = claims.get("name", sub)
        if not isinstance(name, str) or not name.strip():
            name = sub
        origins = claims.get("origins", [])
        if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
            raise Refusal("invalid_claims", 'the "origins" claim must be a list of origins')
        link = claims.get("lnk") if issuer is self.hub else None
        if link is not None and not isinstance(link, str):
            raise Refusal("invalid_claims", 'the "lnk" claim must be a string')
        jti = claims.get("jti")
        exp = claims.get("exp")
        # External principals live in their issuer's namespace: "alice" of the shop is not
        # the hub's "alice".
        principal = sub if issuer is self.hub else f"{issuer.name}:{sub}"
        return Principal(
            sub=principal,
            name=name.strip()[:MAX_NAME],
            role=role,
            sessions=_id_set(claims, "sessions", None),
            agents=_id_set(claims, "agents", frozenset()),
            origins=tuple(origins[:MAX_LIST]),
            link_id=link,
            jti=jti if isinstance(jti, str) else None,
            expires_at=int(exp) if isinstance(exp, int | float) else None,
            issuer=issuer.name,
            claims=dict(claims),
        )
