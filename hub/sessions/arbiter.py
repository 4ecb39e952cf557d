"""The arbitration rules that need no I/O: who may do what, and what a prompt or an attach asks.

Theory of operation
-------------------
Roles are ordered ``viewer < approver < driver < owner``; each includes the ones before it.
Every method a client may call has one needed role, in ``METHOD_ROLES`` (methods not listed
only read and need ``viewer``). The connection checks it before a method runs, against the
caller's role *in the session the request names* (a client may attach with less than its
connection's role), and refuses with ``-32040`` naming the missing role. The session layer
checks again where the answer depends on state (whose queued prompt, who holds the lease,
who may answer a permission request under the current policy).

A prompt is started, queued or refused by ``prompt_action``; a permission request goes to the
clients ``may_answer`` accepts; ``session/attach`` parameters (role names of the multi-client
attach proposal, ``historyPolicy``) are parsed here. ``docs/arbitration.md`` tells the same
rules from the client's side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from hub.protocol.errors import InvalidParams
from hub.settings import (
    PERMISSION_POLICIES,
    PROMPT_POLICIES,
    ROLES,
    PermissionPolicy,
    PromptPolicy,
    Role,
    role_rank,
)

METHOD_ROLES: Final[Mapping[str, Role]] = {
    # driver: prompt, cancel, change config options, manage its own queued prompts, the lease
    "session/prompt": "driver",
    "session/cancel": "driver",
    "session/set_config_option": "driver",
    "session/set_mode": "driver",
    "_hub/queue/withdraw": "driver",
    "_hub/lease/request": "driver",
    "_hub/lease/release": "driver",
    # owner: create, close and delete sessions, change policies, grant the lease
    "session/new": "owner",
    "session/close": "owner",
    "session/delete": "owner",
    "_hub/set_policy": "owner",
    "_hub/lease/grant": "owner",
    # owner: log an agent in or out (its process serves every session on it)
    "authenticate": "owner",
    "auth/login": "owner",
    "logout": "owner",
    "auth/logout": "owner",
    "_hub/agent_login": "owner",
    "_hub/agent_logout": "owner",
    "_hub/agent_stderr": "owner",
    "_hub/share/create": "owner",
    "_hub/share/list": "owner",
    "_hub/share/revoke": "owner",
    "_hub/audit/list": "owner",
    "_hub/import": "owner",
    "_hub/rules/add": "owner",
    "_hub/rules/remove": "owner",
}
"""The role each mutating method needs; every other method needs ``viewer``."""

HUB_METHODS: Final[frozenset[str]] = frozenset(
    {
        # an agent process serves every session on it: its login, its stderr
        "authenticate",
        "auth/login",
        "logout",
        "auth/logout",
        "_hub/agent_login",
        "_hub/agent_logout",
        "_hub/agent_stderr",
        # a new session is outside every list of existing sessions
        "session/new",
        # the trail names every session's principals
        "_hub/audit/list",
        # an archive is a new session, listed to every credential for every session
        "_hub/import",
    }
)
"""Methods that act beyond one session: besides their role they need a credential for the
whole hub (every session, not a share link: ``Principal.whole_hub``); the agent methods also
need the credential's ``agents`` claim to name the agent (checked where the agent is known)."""

LINK_METHODS: Final[frozenset[str]] = frozenset(
    {"_hub/share/create", "_hub/share/list", "_hub/share/revoke"}
)
"""Methods that manage share links, which a share link may not call, whatever its role: a
link's holder is a guest, not the session's owner, and a link that minted links could hand out
more access than it was given (more uses, later expiry) to people its owner never chose."""


def scope_refusal(method: str, *, whole_hub: bool, link: bool) -> tuple[str, str] | None:
    """What ``method`` needs that the credential lacks, as ``(scope, description)`` (``hub``
    or ``not_link``; ``whole_hub``: the credential is one for every session and not a share
    link; ``link``: it is a share link), or ``None``."""
    if method in HUB_METHODS and not whole_hub:
        return "hub", "a credential for the whole hub (every session, not a share link)"
    if method in LINK_METHODS and link:
        return "not_link", "a credential that is not a share link (links do not manage links)"
    return None


ANSWER_ROLE: Final[Role] = "approver"
"""The least role whose answer to a hub request (a permission copy) can count."""

ELICITATION_ROLE: Final[Role] = "driver"
"""The least role an ``elicitation/create`` is routed to."""

ATTACH_ROLE_NAMES: Final[Mapping[str, Role]] = {"observer": "viewer", "controller": "driver"}
"""The multi-client attach proposal's role names, as hub roles."""


def required_role(method: str) -> Role:
    """The role ``method`` needs (``viewer`` for methods that only read)."""
    return METHOD_ROLES.get(method, "viewer")


def allows(have: str, needed: Role) -> bool:
    """Whether role ``have`` includes role ``needed`` (an unknown role allows nothing)."""
    return role_rank(have) >= 0 and role_rank(have) >= role_rank(needed)


def capped(requested: Role | None, granted: Role) -> Role:
    """The role a client gets when it asks for ``requested``: never more than ``granted``."""
    if requested is None or role_rank(requested) > role_rank(granted):
        return granted
    return requested


def may_answer(policy: PermissionPolicy, role: Role, holds_lease: bool) -> bool:
    """Whether a client may answer a permission request under permission ``policy``.

    ``first``: any approver or above; ``owner``: owners only; ``lease``: the lease holder
    (who is at least a driver) and owners.
    """
    if policy == "owner":
        return allows(role, "owner")
    if policy == "lease":
        return allows(role, "owner") or (holds_lease and allows(role, "driver"))
    return allows(role, ANSWER_ROLE)


PromptAction = Literal["start", "queue", "busy", "not_holder"]


def prompt_action(
    policy: PromptPolicy, *, busy: bool, queued: bool, holds_lease: bool
) -> PromptAction:
    """What a driver's prompt does under prompt ``policy``.

    ``start`` it now; ``queue`` it (policy ``queue``, the agent busy or others waiting);
    refuse it as ``busy`` (policy ``reject``, or ``lease`` while a turn runs); refuse it as
    ``not_holder`` (policy ``lease``, the caller does not hold the lease).
    """
    if policy == "lease":
        if not holds_lease:
            return "not_holder"
        return "busy" if busy else "start"
    if busy or queued:
        return "queue" if policy == "queue" else "busy"
    return "start"


def check_prompt_policy(value: Any) -> PromptPolicy:
    """``value`` as a prompt policy; ``InvalidParams`` naming the valid ones otherwise."""
    for policy in PROMPT_POLICIES:
        if policy == value:
            return policy
    raise InvalidParams(f"prompt policy must be one of {', '.join(PROMPT_POLICIES)}")


def check_permission_policy(value: Any) -> PermissionPolicy:
    """``value`` as a permission policy; ``InvalidParams`` naming the valid ones otherwise."""
    for policy in PERMISSION_POLICIES:
        if policy == value:
            return policy
    raise InvalidParams(f"permission policy must be one of {', '.join(PERMISSION_POLICIES)}")


def hub_role(value: Any) -> Role | None:
    """``value`` as a hub role name (``None`` when absent); ``InvalidParams`` otherwise."""
    if value is None:
        return None
    for role in ROLES:
        if role == value:
            return role
    raise InvalidParams(f"unknown role {value!r}")


def attach_role(value: Any) -> Role | None:
    """The hub role a ``session/attach`` asks for: a hub role name or the proposal's
    ``observer`` / ``controller``; ``None`` when absent. ``InvalidParams`` otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        if value in ATTACH_ROLE_NAMES:
            return ATTACH_ROLE_NAMES[value]
        for role in ROLES:
            if role == value:
                return role
    raise InvalidParams(f"unknown role {value!r}: use {', '.join((*ROLES, *ATTACH_ROLE_NAMES))}")


@dataclass(frozen=True, slots=True)
class HistoryPolicy:
    """What a ``session/attach`` replays before its response.

    ``full``: the compacted state; ``none``: nothing; ``pending_only``: only what waits for
    someone (pending permission requests, the queue, the current state); ``after``: the
    events after the last one of message ``message_id``.
    """

    kind: Literal["full", "none", "pending_only", "after"]
    message_id: str | None = None


def history_policy(value: Any) -> HistoryPolicy:
    """Parse ``historyPolicy``: ``"full"`` (also when absent), ``"none"``, ``"pending_only"``,
    or ``{"type": "after", "messageId": ID}`` (``{"afterMessageId": ID}`` too)."""
    if value is None or value == "full":
        return HistoryPolicy("full")
    if value == "none":
        return HistoryPolicy("none")
    if value == "pending_only":
        return HistoryPolicy("pending_only")
    if isinstance(value, Mapping):
        message_id = value.get("messageId", value.get("afterMessageId"))
        kind = value.get("type", "after")
        if kind == "after" and isinstance(message_id, str) and message_id:
            return HistoryPolicy("after", message_id)
    raise InvalidParams(
        "historyPolicy must be full, pending_only, none or {type: after, messageId}"
    )


PENDING_VARIANTS: Final = frozenset({"state_update", "_hub_queue", "_hub_lease", "_hub_policy"})


def pending_only(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The part of a compacted replay that ``pending_only`` keeps: pending permission
    records, the prompt queue, the lease, the policies and the current state."""
    kept = []
    for update in updates:
        variant = update.get("sessionUpdate")
        if variant in PENDING_VARIANTS or (
            variant == "_hub_permission" and update.get("status") == "pending"
        ):
            kept.append(update)
    return kept
