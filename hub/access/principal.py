"""``Principal``: an authenticated caller, and ``Refusal``: why a credential was not accepted.

A principal is built from a verified credential (a JWT's claims, see ``hub.access.tokens``)
or, with ``auth = "none"`` on loopback, from the settings. Everything the hub later decides
about a connection (its role ceiling, which sessions it may see, which agents it may start)
reads these fields, never anything the client says about itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from hub.settings import ROLES, Role, role_rank

ALL: Final = None
"""The value of ``sessions`` / ``agents`` that means "every one" (the claim ``"*"``)."""

MAX_NAME = 80


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection is and what it may reach.

    ``sub`` is the principal's stable id (``link:ID`` for a share link), ``name`` what others
    see in presence, ``role`` the ceiling (a client may ask for less, never more).
    ``sessions`` and ``agents`` are ``None`` for "all" or a frozen set of ids/names (empty:
    none). ``origins`` are the browser origins an embed token may be used from. ``link_id``
    names the share link that admitted the connection, ``jti`` the token id, ``expires_at``
    the token's ``exp`` (Unix seconds), ``issuer`` who signed it (``hub``, an external
    issuer's configured name, or ``none`` when auth is off).
    """

    sub: str
    name: str
    role: Role
    sessions: frozenset[str] | None = ALL
    agents: frozenset[str] | None = frozenset()
    origins: tuple[str, ...] = ()
    link_id: str | None = None
    jti: str | None = None
    expires_at: int | None = None
    issuer: str = "hub"
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def may_see(self, session_id: str) -> bool:
        """Whether the credential's ``sessions`` claim covers ``session_id``."""
        return self.sessions is None or session_id in self.sessions

    def may_start(self, agent: str) -> bool:
        """Whether the credential's ``agents`` claim covers ``agent``: ``session/new`` may
        start sessions on it, and (for an owner of the whole hub) log it in and out and read
        its stderr."""
        return self.agents is None or agent in self.agents

    @property
    def whole_hub(self) -> bool:
        """Whether the credential is one for the whole hub: every session, and not a share
        link (a link's holder is a guest of one session, whatever its role there). Methods
        that act beyond one session need it (``hub.sessions.arbiter.HUB_METHODS``)."""
        return self.sessions is None and self.link_id is None

    def role_at_most(self, requested: str | None) -> Role:
        """The role a client gets when it asks for ``requested``: never above ``role``."""
        if requested is None or requested not in ROLES:
            return self.role
        if role_rank(requested) > role_rank(self.role):
            return self.role
        return requested  # type: ignore[return-value,unused-ignore]

    def public(self) -> dict[str, Any]:
        """What the principal may learn about itself (``/auth/whoami``, ``initialize``)."""
        return {
            "principal": self.sub,
            "name": self.name,
            "role": self.role,
            "sessions": "*" if self.sessions is None else sorted(self.sessions),
            "agents": "*" if self.agents is None else sorted(self.agents),
            "expiresAt": self.expires_at,
            "link": self.link_id,
        }


class Refusal(Exception):
    """A credential or request the hub does not accept.

    ``code`` is a stable machine-readable reason the web UI maps to a page (``missing``,
    ``malformed``, ``bad_signature``, ``algorithm``, ``unknown_key``, ``unknown_issuer``,
    ``expired``, ``not_yet_valid``, ``wrong_audience``, ``wrong_issuer``, ``missing_claim``,
    ``invalid_claims``, ``revoked``, ``used_up``, ``unavailable`` (503: the link store cannot
    be asked), ``origin``, ``host``, ``scope``);
    ``status`` the HTTP status of the refusal before an upgrade (401, 403 or 421).
    """

    def __init__(self, code: str, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message}
