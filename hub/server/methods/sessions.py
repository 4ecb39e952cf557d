"""The ACP session methods: new, list, resume, load, attach, detach, prompt, config, mode,
close, delete."""

from __future__ import annotations

from typing import Any

import orjson

from hub.protocol.errors import (
    FORBIDDEN,
    INVALID_PARAMS,
    LIMIT_REACHED,
    hub_error,
    invalid_params,
)
from hub.protocol.mcp_servers import check_mcp_servers_v2, mcp_servers_v1_to_v2
from hub.server import listing
from hub.server.config_rendering import config_result
from hub.server.methods.caller import AsyncHandler, Caller, Result, SyncHandler
from hub.server.methods.params import check_param, hub_meta_of, string
from hub.sessions import arbiter, workspace
from hub.sessions.errors import SessionFailure
from hub.sessions.ops import Replay
from hub.settings import Role


def _requested_role(params: dict[str, Any]) -> Role | None:
    """The role a resume or load asks for (``_meta["acp-hub"].role``, or ``role``)."""
    role = hub_meta_of(params).get("role")
    if role is None:
        role = params.get("role")
    if not isinstance(role, str):
        return None
    checked: Role | None = check_param(arbiter.hub_role, role)
    return checked


def _replay_request(
    params: dict[str, Any], default: Replay
) -> tuple[Replay, tuple[int, int] | None]:
    """What a resume or load replays: ``replayFrom``, or the v1 ``_meta`` forms."""
    replay_from = params.get("replayFrom")
    hub_meta = hub_meta_of(params)
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


async def _session_new(conn: Caller, params: dict[str, Any]) -> Result:
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
    agent = hub_meta_of(params).get("agent")
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


def _session_list(conn: Caller, params: dict[str, Any]) -> Result:
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


def _resume(conn: Caller, params: dict[str, Any], default: Replay) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    replay, after = _replay_request(params, default)
    return conn.attach(session, replay=replay, after=after, role=_requested_role(params))


def _session_resume(conn: Caller, params: dict[str, Any]) -> Result:
    return _resume(conn, params, None)


def _session_load(conn: Caller, params: dict[str, Any]) -> Result:
    return _resume(conn, params, "start")


def _session_attach(conn: Caller, params: dict[str, Any]) -> Result:
    """The multi-client attach proposal: role + historyPolicy."""
    session = conn.registry.get(params.get("sessionId"))
    policy = check_param(arbiter.history_policy, params.get("historyPolicy"))
    mapped_role = check_param(arbiter.attach_role, params.get("role"))
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


def _session_detach(conn: Caller, params: dict[str, Any]) -> Result:
    conn.detach_session(conn.attached_session(params.get("sessionId")))
    return {}


async def _session_prompt(conn: Caller, params: dict[str, Any]) -> Result:
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


async def _session_set_config_option(conn: Caller, params: dict[str, Any]) -> Result:
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
    return config_result(conn.version, options)


async def _session_set_mode(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.attached_session(params.get("sessionId"))
    await session.set_mode(conn, string(params, "modeId", "modeId is required"))
    return {}


async def _session_close(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.registry.get(params.get("sessionId"))
    await conn.registry.close(conn, session, delete=False)
    conn.forget_session(session)
    return {}


async def _session_delete(conn: Caller, params: dict[str, Any]) -> Result:
    session = conn.registry.find(string(params, "sessionId", "sessionId must be a string"))
    if session is None:
        return {}  # idempotent, as ACP asks
    await conn.registry.close(conn, session, delete=True)
    conn.forget_session(session)
    return {}


SYNC: dict[str, SyncHandler] = {
    "session/list": _session_list,
    "session/resume": _session_resume,
    "session/load": _session_load,
    "session/attach": _session_attach,
    "session/detach": _session_detach,
}

ASYNC: dict[str, AsyncHandler] = {
    "session/new": _session_new,
    "session/prompt": _session_prompt,
    "session/set_config_option": _session_set_config_option,
    "session/set_mode": _session_set_mode,
    "session/close": _session_close,
    "session/delete": _session_delete,
}
