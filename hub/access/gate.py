"""``Gate``: the one decision every connection attempt and every HTTP request gets.

``Gate.from_settings`` assembles the hub's access machinery from the settings: the token
authority (the hub's key and the external issuers), the share-link store, the audit sink,
the served host names. ``check_host`` answers "may this ``Host`` be served at all";
``admit`` answers "who is this ``/acp`` client, and may it connect from this origin", raising
a ``Refusal`` (with the HTTP status to answer before the upgrade) otherwise. A share link's
admission is counted by the link store, which may ask a store shared by several nodes: that is
why ``admit`` is a coroutine (everything else is decided on the spot).

With ``auth = "none"`` (loopback only, enforced by the settings) every client is the
``local`` principal with the ``default_role``, and no key is loaded.
"""

from __future__ import annotations

import getpass
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from hub.access import owner_url
from hub.access.audit import AuditSink, JsonlAuditLog, NullAudit
from hub.access.carriers import carried_tokens, offered_subprotocols
from hub.access.hosts import (
    effective_allowed_hosts,
    host_allowed,
    origin_matches,
    same_origin,
)
from hub.access.issuers import parse_issuers
from hub.access.keys import load_hub_key, state_dir
from hub.access.links import (
    FileLinkStore,
    LinkStore,
    MemoryLinkStore,
    ShareLink,
    lineage_refusal,
    minted_by,
    refusal_of,
)
from hub.access.principal import Principal, Refusal
from hub.access.tokens import TokenAuthority
from hub.settings import Role, Settings

OWNER_SUB = "owner"


@dataclass(frozen=True, slots=True)
class Admission:
    """An accepted ``/acp`` client: its principal, the subprotocol to select in the upgrade
    response (never the token entry), and where its token came from."""

    principal: Principal
    subprotocol: str | None
    source: str | None


def owner_name() -> str:
    """The owner URL's display name: the login name of the user running the hub (the person
    who opens it), else ``owner``."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        return OWNER_SUB
    return name if name and name.isprintable() else OWNER_SUB


class Gate:
    """See the module docstring. ``authority`` is ``None`` exactly when auth is off."""

    def __init__(
        self,
        settings: Settings,
        *,
        authority: TokenAuthority | None,
        links: LinkStore,
        audit: AuditSink,
        state: Path,
    ) -> None:
        self.settings = settings
        self.authority = authority
        self.links = links
        self.audit = audit
        self.state_dir = state
        self.allowed_hosts = effective_allowed_hosts(settings.host, settings.allowed_hosts)
        self.on_revoke: list[Callable[[str], int]] = []
        """Called with a link id once it is revoked, here or on another node (``link_revoked``);
        each returns how many live connections it closed (the server closes those the link
        admitted, and those of the links it minted)."""

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        environ: Mapping[str, str] = os.environ,
        *,
        links: LinkStore | None = None,
    ) -> Gate:
        """Build the gate; raises ``ValueError`` (with a message for the user) when the key,
        an issuer or the share-link file cannot be used. ``links``: where share links live
        (a hub on a durable store keeps them there); by default ``links.json`` in the state
        directory."""
        state = state_dir(settings, environ)
        audit: AuditSink
        if settings.audit_log == "off":
            audit = NullAudit()
        else:
            audit = JsonlAuditLog(
                Path(settings.audit_log).expanduser()
                if settings.audit_log
                else state / "audit.jsonl"
            )
        if settings.auth == "none":
            return cls(settings, authority=None, links=MemoryLinkStore(), audit=audit, state=state)
        key = load_hub_key(settings, environ)
        issuers = parse_issuers(
            settings.issuers,
            default_audience=settings.token_audience,
            default_leeway=settings.token_leeway,
            reserved_iss=settings.token_issuer,
            environ=environ,
        )
        authority = TokenAuthority(
            key,
            iss=settings.token_issuer,
            audience=settings.token_audience,
            leeway=settings.token_leeway,
            issuers=issuers,
        )
        if links is None:
            links = FileLinkStore(state / "links.json")
        return cls(settings, authority=authority, links=links, audit=audit, state=state)

    @property
    def enabled(self) -> bool:
        return self.authority is not None

    # -- checks ------------------------------------------------------------------------------

    def check_host(self, host: str | None) -> None:
        """``Refusal`` (421) unless ``host`` is one of the served names."""
        if not host_allowed(host, self.allowed_hosts):
            raise Refusal("host", "this hub does not serve that host name", 421)

    def authenticate(self, token: str | None) -> Principal:
        """The principal ``token`` proves (share links: still known, not revoked, not used
        up, as this node's copy of the links says), or a ``Refusal``. With auth off: the local
        principal, whatever the token."""
        principal = self._verified(token)
        if principal.link_id is not None:
            link = self.links.get(principal.link_id)
            refusal = refusal_of(link)
            if refusal is None and link is not None:
                refusal = lineage_refusal(self.links, link)
            if refusal is not None:
                raise refusal
        return principal

    async def verify(self, token: str | None, *, counted: bool = False) -> Principal:
        """``authenticate``, except that a share link this node does not know yet (minted on
        another node a moment ago) is first looked up in the link store. ``counted``: the
        request belongs to a connection whose use of the link was counted already (a later
        request of a Streamable HTTP connection), which a link used up since still admits."""
        principal = self._verified(token)
        if principal.link_id is not None:
            link = self.links.get(principal.link_id)
            if link is None:
                # Refusal (503) when the store cannot be asked.
                link = await self.links.fetch(principal.link_id)
            refusal = refusal_of(link)
            if refusal is not None and not (counted and refusal.code == "used_up"):
                raise refusal
            assert link is not None
            refusal = lineage_refusal(self.links, link)
            if refusal is not None:
                raise refusal
        return principal

    def _verified(self, token: str | None) -> Principal:
        if self.authority is None:
            return self.local_principal()
        if token is None:
            raise Refusal("missing", "this hub needs a credential (a token)")
        return self.authority.verify(token)

    def leeway_of(self, principal: Principal) -> float:
        """The seconds of clock skew the issuer of ``principal`` tolerates on ``exp``: how
        long after its ``exp`` a credential still admits (``hub.server.expiry``)."""
        authority = self.authority
        if authority is None:
            return 0.0
        for issuer in authority.issuers.values():
            if issuer.name == principal.issuer:
                return issuer.leeway
        return authority.hub.leeway

    def local_principal(self) -> Principal:
        return Principal(
            sub="local",
            name="local",
            role=self.settings.default_role,
            sessions=None,
            agents=None,
            issuer="none",
        )

    async def admit(
        self,
        *,
        host: str | None,
        origin: str | None,
        authorization: str | None,
        subprotocols: str | None,
        query_string: str,
        count_use: bool = True,
    ) -> Admission:
        """Decide an ``/acp`` upgrade or request (see the module docstring). A share link's
        use is counted (``count_use``: a new connection, not each request of one) only once
        everything else has passed, by the link store, which refuses it (``used_up``,
        ``revoked``) as it counts. Without ``count_use`` a used-up link is not refused: the
        caller counts the use of a new connection itself (``LinkStore.use``)."""
        self.check_host(host)
        embed_origin = False
        if origin is not None:
            if origin.strip().lower() == "null":
                raise Refusal("origin", "pages with an opaque (null) origin may not connect", 403)
            if not (
                same_origin(origin, host) or origin_matches(origin, self.settings.allowed_origins)
            ):
                if not origin_matches(origin, self.settings.embed_origins):
                    raise Refusal("origin", "pages of that origin may not connect", 403)
                embed_origin = True
        carried = carried_tokens(authorization, offered_subprotocols(subprotocols), query_string)
        principal, source = await self._first_valid(carried.tokens, counted=not count_use)
        if embed_origin and not (
            self.enabled and origin is not None and origin_matches(origin, principal.origins)
        ):
            raise Refusal(
                "origin", "an embedding page needs an embed token that names its origin", 403
            )
        if count_use and principal.link_id is not None:
            await self.links.use(principal.link_id)
        return Admission(principal, carried.subprotocol, source)

    async def _first_valid(
        self, tokens: tuple[tuple[str, str], ...], *, counted: bool
    ) -> tuple[Principal, str | None]:
        if not tokens:
            return await self.verify(None), None
        first: Refusal | None = None
        for token, source in tokens:
            try:
                return await self.verify(token, counted=counted), source
            except Refusal as refusal:
                first = first or refusal
        assert first is not None
        raise first

    # -- minting -----------------------------------------------------------------------------

    def mint_owner_token(self) -> str:
        """A token for the person who started the hub: owner of everything, every agent."""
        if self.authority is None:
            raise RuntimeError("auth is off")
        return self.authority.mint(
            sub=OWNER_SUB,
            name=owner_name(),
            role="owner",
            ttl=self.settings.owner_token_ttl,
            sessions=None,
            agents=None,
        )

    def write_owner_url(self, url: str, port: int) -> Path:
        """Write the owner URL to this hub's file in the state directory (``owner-url-PORT``,
        0600; ``hub.access.owner_url``); its path."""
        return owner_url.write(self.state_dir, port, url)

    def create_link(
        self,
        *,
        session_id: str,
        role: Role,
        ttl: float,
        created_by: str,
        label: str = "",
        max_uses: int | None = None,
    ) -> tuple[ShareLink, str]:
        """Record a share link and mint its token (shown once, never stored)."""
        if self.authority is None:
            raise RuntimeError("auth is off")
        link_id = f"l-{secrets.token_hex(8)}"
        now = time.time()
        link = ShareLink(
            link_id=link_id,
            session_id=session_id,
            role=role,
            created_by=created_by,
            created_at=now,
            expires_at=now + ttl,
            label=label,
            max_uses=max_uses,
        )
        self.links.add(link)
        # Alike in shape only: an audit record's fields, by keyword.
        self.audit.record(
            "share_created",
            principal=created_by,
            linkId=link_id,
            sessionId=session_id,
            role=role,
            expiresAt=link.expires_at,
            maxUses=max_uses,
            label=label,
        )
        token = self.authority.mint(
            sub=f"link:{link_id}",
            name=label or f"guest ({role})",
            role=role,
            ttl=ttl,
            sessions=[session_id],
            agents=(),
            jti=link_id,
            link_id=link_id,
            now=now,
        )
        return link, token

    async def revoke_link(self, link_id: str, *, by: str) -> int:
        """Revoke ``link_id`` and every link it minted, transitively (``minted_by``; each
        recorded, idempotent), close every live connection they admitted here at once, and
        return how many were closed once the revocations are durable (other nodes close
        theirs when they learn of them: ``link_revoked``)."""
        root = self.links.get(link_id)
        if root is None:
            return 0
        for known in [root, *minted_by(self.links, root)]:
            link = self.links.revoke(known.link_id, by)
            if link is not None and not known.revoked:
                self.audit.record(
                    "share_revoked",
                    principal=by,
                    linkId=known.link_id,
                    sessionId=link.session_id,
                    **({} if known is root else {"via": link_id}),
                )
        closed = self.link_revoked(link_id)
        await self.links.flush()
        return closed

    def link_revoked(self, link_id: str) -> int:
        """Tell every ``on_revoke`` listener that ``link_id`` is revoked; how many
        connections they closed (a listener closes those of the links it minted too:
        ``hub.access.links.ancestry``)."""
        return sum(listener(link_id) for listener in self.on_revoke)
