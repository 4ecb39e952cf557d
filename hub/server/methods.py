"""The ACP methods a client may call on ``/acp``, and the hub's own ``_hub/*`` methods.

Each handler takes the ``ClientConnection`` and the request's params (an object) and returns
the result, or raises ``RpcFailure`` (``SessionFailure``, ``AgentError``) with the JSON-RPC
error to answer; a ``PeerError`` is answered ``-32602``, a ``TranslationError`` (a request
the other side's protocol version cannot express) ``-32048``, anything else ``-32603`` (a bug,
logged with its traceback; ``hub.protocol.errors``). Handlers validate their params and call
the public API of the connection, the registry and the session. The connection checks the
caller's role (``hub.sessions.arbiter.METHOD_ROLES``) before a handler runs.

``SYNC_METHODS`` are answered inline, in the order they arrive: an attach queues its replay,
its answer and then the live events without yielding to the event loop. ``ASYNC_METHODS`` wait
for the agent and run in the connection's task group. The wire contract is in
``docs/protocol.md``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from hub import __version__
from hub.access.gate import Gate
from hub.access.principal import Refusal
from hub.access.qr import qr_svg
from hub.agents.errors import AgentError
from hub.protocol.capabilities import auth_methods_v2_to_v1, capabilities_v2_to_v1
from hub.protocol.errors import (
    FORBIDDEN,
    INVALID_PARAMS,
    LIMIT_REACHED,
    STORE_UNAVAILABLE,
    InvalidParams,
    VersionError,
    forbidden,
    forbidden_scope,
    hub_error,
    invalid_params,
    resource_not_found,
)
from hub.protocol.mcp_servers import check_mcp_servers_v2, mcp_servers_v1_to_v2
from hub.protocol.version import negotiate_as_agent
from hub.server import listing
from hub.server.exporting import hub_export, hub_import
from hub.server.watch import watch_of
from hub.sessions import arbiter, rules, workspace
from hub.sessions.errors import SessionFailure
from hub.sessions.session import Replay
from hub.settings import ROLES, Role
from hub.store.audit import StoredAudit

if TYPE_CHECKING:
    from hub.agents.agent import Agent
    from hub.server.connection import ClientConnection

log = logging.getLogger("hub.server")

Result = dict[str, Any] | None
SyncHandler = Callable[["ClientConnection", dict[str, Any]], Result]
AsyncHandler = Callable[["ClientConnection", dict[str, Any]], Awaitable[Result]]


# -- params ------------------------------------------------------------------------------------


def _hub_meta(params: dict[str, Any]) -> dict[str, Any]:
    meta = params.get("_meta")
    hub_meta = meta.get("acp-hub") if isinstance(meta, dict) else None
    return hub_meta if isinstance(hub_meta, dict) else {}


def _checked(parse: Callable[[Any], Any], value: Any) -> Any:
    try:
        return parse(value)
    except InvalidParams as exc:
        raise SessionFailure(invalid_params(str(exc))) from None


def _requested_role(params: dict[str, Any]) -> Role | None:
    """The role a resume or load asks for (``_meta["acp-hub"].role``, or ``role``)."""
    role = _hub_meta(params).get("role")
    if role is None:
        role = params.get("role")
    if not isinstance(role, str):
        return None
    checked: Role | None = _checked(arbiter.hub_role, role)
    return checked


def _replay_request(
    params: dict[str, Any], default: Replay
) -> tuple[Replay, tuple[int, int] | None]:
    """What a resume or load replays: ``replayFrom``, or the v1 ``_meta`` forms."""
    replay_from = params.get("replayFrom")
    hub_meta = _hub_meta(params)
    if replay_from is None:
        after = hub_meta.get("after")
        if isinstance(after, dict):
            replay_from = {"type": "_hub_after", **after}
        elif hub_meta.get("replay") == "start":
            replay_from = {"type": "start"}
    if replay_from is None:
        return default, None
    if not isinstance(replay_from, dict):
        raise SessionFailure(invalid_params("replayFrom must be an object"))
    kind = replay_from.get("type")
    if kind == "start":
        return "start", None
    if kind == "_hub_after":
        epoch, seq = replay_from.get("epoch"), replay_from.get("seq")
        if (
            not isinstance(epoch, int)
            or not isinstance(seq, int)
            or isinstance(seq, bool)
            or seq < 0
        ):
            raise SessionFailure(invalid_params("_hub_after needs integer epoch and seq >= 0"))
        return "after", (epoch, seq)
    raise SessionFailure(invalid_params(f"unsupported replayFrom type {kind!r}"))


def _string(params: dict[str, Any], key: str, message: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise SessionFailure(invalid_params(message))
    return value


# -- initialize --------------------------------------------------------------------------------


async def _initialize(conn: ClientConnection, params: dict[str, Any]) -> Result:
    try:
        version = negotiate_as_agent(params.get("protocolVersion"))
    except VersionError as exc:
        raise SessionFailure(invalid_params(str(exc))) from None
    hub_meta = _hub_meta(params)
    info = params.get("info") if version >= 2 else params.get("clientInfo")
    if not isinstance(info, dict):
        info = params.get("clientInfo") or params.get("info")
    # The name others see: the one this connection asks for, else the credential's display
    # name (the token's ``name``, a link's label), else the client program's.
    name = hub_meta.get("name")
    if not isinstance(name, str) or not name:
        name = conn.access.name
    program = info.get("name") if isinstance(info, dict) else None
    program = program if isinstance(program, str) else ""
    if not isinstance(name, str) or not name:
        name = program
    requested = hub_meta.get("role")
    role = conn.granted_role
    if isinstance(requested, str):
        role = _checked(arbiter.hub_role, requested)
    conn.identify(
        version=version,
        name=name if isinstance(name, str) and name else f"client {conn.connection_id[-4:]}",
        role=role,
        hub_events=version >= 2 or hub_meta.get("events") is True,
        batches=version >= 2 and hub_meta.get("batches") is True,
        program=program,
    )
    supervisor = conn.registry.supervisor
    agents = [{"name": n, "default": n == supervisor.default_name} for n in supervisor.names()]
    capabilities = await _capabilities(conn)
    meta = {
        "acp-hub": {
            "connectionId": conn.connection_id,
            "clientId": conn.connection_id,
            "principal": conn.principal,
            "principalName": conn.access.name,
            "role": conn.role,
            "grantedRole": conn.granted_role,
            "sessionScope": "*" if conn.access.sessions is None else sorted(conn.access.sessions),
            "link": conn.access.link_id,
            "expiresAt": conn.access.expires_at,
            "name": conn.name,
            "agents": agents,
            "defaultAgent": supervisor.default_name,
            "features": ["replay", "cursor", "batch-replay", "arbitration", "attach"],
            "version": __version__,
        }
    }
    if conn.access.whole_hub and arbiter.allows(conn.role, arbiter.required_role("session/new")):
        # Where a session may work, for the page that starts one; host paths are not shown to
        # those who cannot start sessions.
        meta["acp-hub"]["workspaceRoots"] = [str(root) for root in conn.registry.workspace_roots]
    hub_info = {"name": "acp-hub", "title": "acp-hub", "version": __version__}
    auth_methods = _auth_methods(conn)
    log.info("= %s: initialized v%d as %s (%s)", conn.connection_id, version, conn.role, conn.name)
    if version >= 2:
        return {
            "protocolVersion": version,
            "info": hub_info,
            "capabilities": capabilities,
            "authMethods": auth_methods,
            "_meta": meta,
        }
    v1caps = capabilities_v2_to_v1(capabilities)
    v1caps["loadSession"] = True
    session_caps = v1caps.setdefault("sessionCapabilities", {})
    session_caps.update({"list": {}, "resume": {}, "close": {}, "delete": {}})
    session_caps["attach"] = {"roles": list(ROLES)}
    if auth_methods:
        v1caps["auth"] = {"logout": {}}
    return {
        "protocolVersion": version,
        "agentInfo": hub_info,
        "agentCapabilities": v1caps,
        "authMethods": auth_methods_v2_to_v1(auth_methods),
        "_meta": meta,
    }


def _auth_methods(conn: ClientConnection) -> list[dict[str, Any]]:
    """What the hub advertises: to an owner, the default agent's methods the hub can log it
    in with itself (``agent`` and ``env_var``), as ``agent`` methods; to anyone else nothing,
    since only an owner of the whole hub whose ``agents`` claim names the agent may log it in.
    ``terminal`` methods run on the hub's
    host, never through a client."""
    supervisor = conn.registry.supervisor
    if (
        conn.role != "owner"
        or not conn.access.whole_hub
        or supervisor.default_name is None
        or not conn.access.may_start(supervisor.default_name)
    ):
        return []
    agent = supervisor.get(supervisor.default_name)
    methods = []
    for method in agent.auth_methods:
        method_id = method.get("methodId")
        if not isinstance(method_id, str) or agent.login_problem(method_id) is not None:
            continue
        if method.get("type") not in ("agent", "env_var"):
            continue
        entry = {"methodId": method_id, "name": str(method.get("name") or method_id)}
        if isinstance(method.get("description"), str):
            entry["description"] = method["description"]
        methods.append({**entry, "type": "agent"})
    return methods


async def _capabilities(conn: ClientConnection) -> dict[str, Any]:
    """The v2 capabilities the hub advertises: the default agent's prompt and MCP support,
    and the session operations the hub serves itself."""
    session: dict[str, Any] = {"delete": {}, "mcp": {"stdio": {}}}
    # The multi-client attach proposal: session/attach and session/detach with these roles.
    session["attach"] = {"roles": [*ROLES, *arbiter.ATTACH_ROLE_NAMES]}
    supervisor = conn.registry.supervisor
    name = supervisor.default_name
    if name is not None:
        agent = supervisor.get(name)
        try:
            await agent.ensure_started()
        except AgentError as exc:
            log.warning("! default agent %s did not start: %s", name, exc)
        agent_session = agent.capabilities.get("session") if agent.capabilities else None
        if isinstance(agent_session, dict):
            for key in ("prompt", "mcp", "additionalDirectories"):
                if isinstance(agent_session.get(key), dict):
                    session[key] = agent_session[key]
    return {"session": session}


# -- sessions ----------------------------------------------------------------------------------


async def _session_new(conn: ClientConnection, params: dict[str, Any]) -> Result:
    settings = conn.registry.settings
    # A malformed entry is the peer's fault: InvalidParams, answered -32602 with one line.
    raw = params.get("mcpServers")
    servers = mcp_servers_v1_to_v2(raw) if conn.version < 2 else check_mcp_servers_v2(raw)
    try:
        cwd = workspace.check_cwd(params.get("cwd"), conn.registry.workspace_roots)
        servers = workspace.check_mcp_servers(
            servers,
            policy=settings.mcp_servers,
            commands=settings.mcp_commands,
            # The hub's own owners (its signed owner tokens, or everyone with auth off), not
            # an external issuer's owners or a share link: those need `mcp_servers = "any"`.
            is_owner=conn.role == "owner"
            and conn.access.issuer in ("hub", "none")
            and conn.access.link_id is None,
            allowed_env=settings.mcp_allowed_env,
        )
    except workspace.WorkspaceRefusal as exc:
        if exc.kind == "invalid":
            raise SessionFailure(invalid_params(exc.message)) from None
        raise SessionFailure(
            hub_error(FORBIDDEN, f"Forbidden: {exc.message}", {"action": "session/new"})
        ) from None
    agent = _hub_meta(params).get("agent")
    chosen = agent if isinstance(agent, str) else conn.registry.supervisor.default_name
    if chosen is not None and not conn.access.may_start(chosen):
        # The credential's `agents` claim: which agents it may start sessions on (none
        # when absent).
        raise SessionFailure(
            hub_error(
                FORBIDDEN,
                f"Forbidden: this credential may not start sessions on agent {chosen!r}",
                {"action": "session/new", "agent": chosen},
            )
        )
    if agent is not None and not isinstance(agent, str):
        raise SessionFailure(invalid_params("_meta['acp-hub'].agent must be a string"))
    session = await conn.registry.new_session(conn, agent, cwd, servers, creator=conn.principal)
    if conn.closed:
        return None
    # Everything from the start of the log: what the session emitted while it was created.
    result = conn.attach(session, replay="after", after=(session.cursor["epoch"], 0))
    result["sessionId"] = session.id
    return result


def _session_list(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """One page of ``list_page_size`` sessions, ordered by id; ``nextCursor`` while more
    follow (https://agentclientprotocol.com/protocol/v2/session-list#pagination)."""
    cwd = params.get("cwd")
    after = listing.after_cursor(params.get("cursor"))
    entries, more = conn.registry.list(
        cwd=cwd if isinstance(cwd, str) else None,
        after=after,
        limit=conn.registry.settings.list_page_size,
        # A credential scoped to some sessions lists those only.
        visible=None if conn.access.sessions is None else conn.access.may_see,
    )
    result: dict[str, Any] = {"sessions": entries}
    if more:
        result["nextCursor"] = listing.cursor_after(entries[-1]["sessionId"])
    return result


def _resume(conn: ClientConnection, params: dict[str, Any], default: Replay) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    replay, after = _replay_request(params, default)
    return conn.attach(session, replay=replay, after=after, role=_requested_role(params))


def _session_resume(conn: ClientConnection, params: dict[str, Any]) -> Result:
    return _resume(conn, params, None)


def _session_load(conn: ClientConnection, params: dict[str, Any]) -> Result:
    return _resume(conn, params, "start")


def _session_attach(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """The multi-client attach proposal: role + historyPolicy."""
    session = conn.registry.get(params.get("sessionId"))
    policy = _checked(arbiter.history_policy, params.get("historyPolicy"))
    mapped_role = _checked(arbiter.attach_role, params.get("role"))
    replay: Replay = {
        "full": "start",
        "none": None,
        "pending_only": "pending_only",
        "after": "message",
    }[policy.kind]
    result = conn.attach(
        session, replay=replay, role=mapped_role, via_attach=True, message_id=policy.message_id
    )
    result["role"] = session.role_of(conn)
    return result


def _session_detach(conn: ClientConnection, params: dict[str, Any]) -> Result:
    conn.detach_session(conn.attached_session(params.get("sessionId")))
    return {}


async def _session_prompt(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    blocks = params.get("prompt")
    settings = conn.registry.settings
    try:
        size = len(orjson.dumps(blocks))
    except (orjson.JSONEncodeError, TypeError):
        raise SessionFailure(
            invalid_params("prompt cannot be encoded (nested too deep?)")
        ) from None
    if size > settings.max_prompt_bytes:
        raise SessionFailure(
            hub_error(
                INVALID_PARAMS,
                f"Invalid params: the prompt is {size} bytes; this hub takes at most "
                f"{settings.max_prompt_bytes}",
                {"limit": "max_prompt_bytes", "max": settings.max_prompt_bytes},
            )
        )
    if session.state_bytes >= settings.max_state_bytes:
        raise SessionFailure(
            hub_error(
                LIMIT_REACHED,
                "This session's state is full: start a new session to go on",
                {"limit": "max_state_bytes", "max": settings.max_state_bytes},
            )
        )
    return await session.prompt(conn, blocks)


async def _session_set_config_option(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    config_id = params.get("configId")
    if not isinstance(config_id, str) or "value" not in params:
        raise SessionFailure(invalid_params("configId and value are required"))
    value = params["value"]
    kind = params.get("type")
    if kind is None:
        kind = "boolean" if isinstance(value, bool) else "id"
    # The v2 schema's two option value kinds: a boolean, or the id (a string) of a choice.
    if (kind, type(value)) not in (("boolean", bool), ("id", str)):
        raise SessionFailure(
            invalid_params("value must be a boolean (type 'boolean') or a string (type 'id')")
        )
    options = await session.set_config_option(conn, config_id, kind, value)
    return conn.config_result(options)


async def _session_set_mode(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    await session.set_mode(conn, _string(params, "modeId", "modeId is required"))
    return {}


async def _session_close(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    await conn.registry.close(conn, session, delete=False)
    conn.forget_session(session)
    return {}


async def _session_delete(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.registry.find(_string(params, "sessionId", "sessionId must be a string"))
    if session is None:
        return {}  # idempotent, as ACP asks
    await conn.registry.close(conn, session, delete=True)
    conn.forget_session(session)
    return {}


# -- the hub's own methods ---------------------------------------------------------------------


def _hub_queue_withdraw(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    session.withdraw_prompt(conn, _string(params, "queueId", "queueId is required"))
    return {}


def _hub_set_policy(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    return session.set_policy(
        conn, params.get("prompt"), params.get("permission"), params.get("quorum")
    )


# -- permission rules (hub.sessions.rules) ---------------------------------------------------------


def _hub_rules_list(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    return {"rules": rules.session_rules(session.state)}


def _hub_rules_add(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    return rules.add(session, conn, params.get("match"), params.get("answer"))


def _hub_rules_remove(conn: ClientConnection, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    return rules.remove(session, conn, params.get("ruleId"))


# -- share links ---------------------------------------------------------------------------------

MAX_LINK_SECONDS = 30 * 86400.0
LINK_ID = re.compile(r"l-[0-9a-f]{16}")
"""The form of the ids ``Gate.create_link`` mints."""
STORE_WAIT = 10.0
"""Seconds ``_hub/share/create`` and ``_hub/share/revoke`` wait for the store."""


def _gate(conn: ClientConnection) -> Gate:
    gate = conn.gate
    if gate is None or not gate.enabled:
        raise SessionFailure(invalid_params('share links need credentials (auth = "token")'))
    return gate


async def _stored(gate: Gate, what: str) -> None:
    """Wait until the link store holds every change made so far (``STORE_WAIT`` at most)."""
    try:
        with anyio.fail_after(STORE_WAIT):
            await gate.links.flush()
    except TimeoutError:
        raise SessionFailure(
            hub_error(STORE_UNAVAILABLE, f"the store did not take {what} in time; try again")
        ) from None


async def _hub_share_create(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """``{sessionId, role, expiresIn, maxUses?, label?}`` -> ``{linkId, url, token,
    expiresAt, ...}``: a link to one session with at most the caller's role there, answered
    once the link is stored (every node then admits it). A credential for some sessions only
    hands on no more time than it has: the link expires with it at the latest."""
    gate = _gate(conn)
    session = conn.registry.get(params.get("sessionId"))
    role = params.get("role", "viewer")
    if role not in ROLES:
        raise SessionFailure(invalid_params(f"role must be one of {', '.join(ROLES)}"))
    have = conn.role_for(params)
    if not arbiter.allows(have, role):
        raise SessionFailure(forbidden(role, have, "sharing a link with this role"))
    expires_in = params.get("expiresIn")
    if (
        not isinstance(expires_in, int | float)
        or isinstance(expires_in, bool)
        or not 0 < expires_in <= MAX_LINK_SECONDS
    ):
        raise SessionFailure(invalid_params("expiresIn must be seconds, from 1 to 30 days"))
    max_uses = params.get("maxUses")
    if max_uses is not None and (
        not isinstance(max_uses, int) or isinstance(max_uses, bool) or max_uses < 1
    ):
        raise SessionFailure(invalid_params("maxUses must be a positive integer"))
    label = params.get("label", "")
    if not isinstance(label, str) or len(label) > 80:
        raise SessionFailure(invalid_params("label must be a string of at most 80 characters"))
    ttl = float(expires_in)
    if not conn.access.whole_hub and conn.access.expires_at is not None:
        ttl = min(ttl, conn.access.expires_at - time.time())
        if ttl <= 0:
            raise SessionFailure(
                forbidden_scope("_hub/share/create", "expired", "a credential that has not expired")
            )
    link, token = gate.create_link(
        session_id=session.id,
        role=role,
        ttl=ttl,
        created_by=conn.principal,
        label=label.strip(),
        max_uses=max_uses,
    )
    await _stored(gate, "the new link")
    base = conn.settings.public_url.rstrip("/") or conn.base_url or ""
    url = f"{base}/s/{session.id}#token={token}"
    return {**link.public(), "token": token, "url": url, "qrSvg": qr_svg(url)}


def _hub_share_list(conn: ClientConnection, params: dict[str, Any]) -> Result:
    gate = _gate(conn)
    session = conn.registry.get(params.get("sessionId"))
    return {"links": [link.public() for link in gate.links.for_session(session.id)]}


async def _hub_share_revoke(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """Revoke a link: every connection it admitted here closes with 1008 at once, on other
    nodes as soon as they read the change; answered once the revocation is stored."""
    gate = _gate(conn)
    link_id = _string(params, "linkId", "linkId is required")
    link = gate.links.get(link_id)
    if link is None and LINK_ID.fullmatch(link_id):
        # Minted on another node a moment ago: not in this node's copy yet.
        try:
            link = await gate.links.fetch(link_id)
        except Refusal as refusal:
            raise SessionFailure(hub_error(STORE_UNAVAILABLE, refusal.message)) from None
    if link is None or not conn.access.may_see(link.session_id):
        raise SessionFailure(resource_not_found(f"no share link {link_id!r}"))
    # The caller's role on the link's session, whether or not this node serves the session
    # (closed, deleted, or owned by another node): the role it attached with, else its
    # credential's.
    session_role = conn.role_for({"sessionId": link.session_id})
    if not arbiter.allows(session_role, "owner"):
        raise SessionFailure(forbidden("owner", session_role, "_hub/share/revoke"))
    try:
        with anyio.fail_after(STORE_WAIT):
            closed = await gate.revoke_link(link_id, by=conn.principal)
    except TimeoutError:
        raise SessionFailure(
            hub_error(
                STORE_UNAVAILABLE,
                "the link is revoked on this node, but the store did not take the revocation "
                "in time (it is retried); try again",
            )
        ) from None
    return {"linkId": link_id, "revoked": True, "closed": closed}


# -- the audit trail -----------------------------------------------------------------------------

AUDIT_PAGE = 100
AUDIT_PAGE_MAX = 500


async def _hub_audit_list(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """``{before?, limit?}`` -> ``{entries, next}``: the audit trail as the store keeps it,
    newest first, for an owner of the whole hub only (a credential for every session: not a
    share link, not a token scoped to some sessions; ``arbiter.HUB_METHODS``)."""
    gate = conn.gate
    audit = gate.audit if gate is not None and isinstance(gate.audit, StoredAudit) else None
    before = params.get("before")
    if before is not None and (not isinstance(before, str) or not 0 < len(before) <= 64):
        raise SessionFailure(invalid_params("before must be the next cursor of an earlier page"))
    limit = params.get("limit", AUDIT_PAGE)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= AUDIT_PAGE_MAX:
        raise SessionFailure(invalid_params(f"limit must be from 1 to {AUDIT_PAGE_MAX}"))
    if audit is None:  # audit_log = "off"
        return {"entries": [], "next": None}
    try:
        page = await audit.read(before, limit)
    except ValueError:
        raise SessionFailure(
            invalid_params("before must be the next cursor of an earlier page")
        ) from None
    entries = [{**entry, "id": entry_id} for entry_id, entry in page]
    return {"entries": entries, "next": page[-1][0] if len(page) == limit else None}


def _hub_lease(action: str) -> SyncHandler:
    def handler(conn: ClientConnection, params: dict[str, Any]) -> Result:
        session = conn.attached_session(params.get("sessionId"))
        target = params.get("clientId")
        return session.lease_action(conn, action, target if isinstance(target, str) else None)

    return handler


def _hub_subscribe_sessions(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """The dashboard's one subscription: a page of cards now (``cursor``: the next page),
    ``_hub/sessions_changed`` notifications after (``hub.server.watch``)."""
    # A credential scoped to some sessions is told of those only.
    visible = None if conn.access.sessions is None else conn.access.may_see
    watch = watch_of(conn.registry)
    after = listing.after_cursor(params.get("cursor"))
    cards, more = watch.subscribe(conn, visible, after=after, limit=watch.page_size)
    result: dict[str, Any] = {"sessions": cards}
    if more:
        result["nextCursor"] = listing.cursor_after(cards[-1]["sessionId"])
    return result


def _hub_unsubscribe_sessions(conn: ClientConnection, params: dict[str, Any]) -> Result:
    watch_of(conn.registry).unsubscribe(conn)
    return {}


def _hub_agent_stderr(conn: ClientConnection, params: dict[str, Any]) -> Result:
    agent = _agent(conn, params.get("agent") or None, "_hub/agent_stderr")
    return {"agent": agent.name, "stderr": agent.stderr_tail()}


# -- agent login -------------------------------------------------------------------------------
# For an owner of the whole hub (``arbiter.METHOD_ROLES``, ``arbiter.HUB_METHODS``): one agent
# process serves everyone's sessions on it.


def _agent(conn: ClientConnection, name: Any, action: str) -> Agent:
    """The agent ``name`` (the default one when ``None``), which the credential's ``agents``
    claim must name (``-32040`` otherwise, before anything reaches the agent)."""
    name = name if name is not None else conn.registry.supervisor.default_name
    if not isinstance(name, str):
        raise SessionFailure(invalid_params("agent must be the name of an agent"))
    if not conn.access.may_start(name):
        raise SessionFailure(
            forbidden_scope(
                action, "agents", f"a credential whose agents claim names agent {name!r}"
            )
        )
    try:
        return conn.registry.supervisor.get(name)
    except KeyError:
        raise SessionFailure(invalid_params(f"unknown agent {name!r}")) from None


def _login_meta(params: dict[str, Any]) -> dict[str, Any] | None:
    """The client's ``_meta`` for the agent: all but the hub's own key."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return None
    return {k: v for k, v in meta.items() if k != "acp-hub"} or None


async def _authenticate(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """v1 ``authenticate`` / v2 ``auth/login``: the default agent, or the one named in
    ``_meta["acp-hub"].agent``, logged in with ``methodId`` in the agent's own version."""
    agent = _agent(conn, _hub_meta(params).get("agent"), "authenticate")
    method_id = _string(params, "methodId", "methodId is required")
    log.info("= %s: logs agent %s in with %r", conn.connection_id, agent.name, method_id)
    await agent.login(method_id, _login_meta(params))
    return {}


async def _logout(conn: ClientConnection, params: dict[str, Any]) -> Result:
    """v1 ``logout`` / v2 ``auth/logout``, for the default or the named agent."""
    agent = _agent(conn, _hub_meta(params).get("agent"), "logout")
    log.info("= %s: logs agent %s out", conn.connection_id, agent.name)
    await agent.logout()
    return {}


async def _hub_agent_login(conn: ClientConnection, params: dict[str, Any]) -> Result:
    agent = _agent(conn, params.get("agent"), "_hub/agent_login")
    method_id = _string(params, "methodId", "methodId is required")
    log.info("= %s: logs agent %s in with %r", conn.connection_id, agent.name, method_id)
    await agent.login(method_id, _login_meta(params))
    return {"agent": agent.name, "login": agent.login_status.to_dict()}


async def _hub_agent_logout(conn: ClientConnection, params: dict[str, Any]) -> Result:
    agent = _agent(conn, params.get("agent"), "_hub/agent_logout")
    log.info("= %s: logs agent %s out", conn.connection_id, agent.name)
    await agent.logout()
    return {"agent": agent.name, "login": agent.login_status.to_dict()}


SYNC_METHODS: dict[str, SyncHandler] = {
    "session/list": _session_list,
    "session/resume": _session_resume,
    "session/load": _session_load,
    "session/attach": _session_attach,
    "session/detach": _session_detach,
    "_hub/queue/withdraw": _hub_queue_withdraw,
    "_hub/set_policy": _hub_set_policy,
    "_hub/lease/request": _hub_lease("request"),
    "_hub/lease/release": _hub_lease("release"),
    "_hub/lease/grant": _hub_lease("grant"),
    "_hub/agent_stderr": _hub_agent_stderr,
    "_hub/share/list": _hub_share_list,
    "_hub/export": hub_export,
    "_hub/rules/list": _hub_rules_list,
    "_hub/rules/add": _hub_rules_add,
    "_hub/rules/remove": _hub_rules_remove,
    "_hub/subscribe_sessions": _hub_subscribe_sessions,
    "_hub/unsubscribe_sessions": _hub_unsubscribe_sessions,
}

ASYNC_METHODS: dict[str, AsyncHandler] = {
    "initialize": _initialize,
    "session/new": _session_new,
    "session/prompt": _session_prompt,
    "session/set_config_option": _session_set_config_option,
    "session/set_mode": _session_set_mode,
    "session/close": _session_close,
    "session/delete": _session_delete,
    "authenticate": _authenticate,
    "auth/login": _authenticate,
    "logout": _logout,
    "auth/logout": _logout,
    "_hub/agent_login": _hub_agent_login,
    "_hub/agent_logout": _hub_agent_logout,
    "_hub/share/create": _hub_share_create,
    "_hub/share/revoke": _hub_share_revoke,
    "_hub/audit/list": _hub_audit_list,
    "_hub/import": hub_import,
}
