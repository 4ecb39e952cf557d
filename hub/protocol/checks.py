"""The check of every known session update variant: v2, and the hub's own ``_hub_*``.

A check validates a whole payload before the fold (``hub.protocol.state``) touches anything,
so that a malformed update of a known variant raises ``InvalidParams`` and changes nothing. It
returns what the fold needs beyond the update (the decoded bytes of terminal output), else
``None``. The payload shapes are those of the v2 schema
(https://agentclientprotocol.com/protocol/v2/schema) and, for the hub's variants,
``docs/internals.md``. Unknown variants are not checked (the v2 union is open); the removed v1
names are refused: they must have been translated before they get here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from hub.protocol.errors import InvalidParams
from hub.protocol.shapes import (
    check_block,
    decode_base64,
    fail,
    is_int,
    optional_object,
    optional_str,
    require_list,
    require_str,
)
from hub.protocol.variants import CHUNKS, MESSAGES, REMOVED_VARIANTS
from hub.settings import PERMISSION_POLICIES, PROMPT_POLICIES

__all__ = ["CHECKS", "HUB_SNAPSHOTS", "Check", "check", "is_plain_chunk", "variant_of"]

Check = Callable[[str, Mapping[str, Any]], Any]
"""``check(variant, update)``: raises ``InvalidParams``, returns what the fold needs."""

# Plan types the stable v2 schema refuses (they exist only in the unstable schema).
_UNSTABLE_PLAN_TYPES: Final = frozenset({"file", "markdown"})
_PERMISSION_STATUSES: Final = frozenset({"pending", "resolved", "cancelled", "timed_out"})
_AGENT_STATUSES: Final = frozenset(
    {"started", "exited", "restarted", "lost", "logged_in", "logged_out", "login_failed"}
)
_PROMPT_POLICIES: Final = frozenset(PROMPT_POLICIES)
_PERMISSION_POLICIES: Final = frozenset(PERMISSION_POLICIES)
"""Every policy ``_hub/set_policy`` accepts is one ``_hub_policy`` records (the session's
policies are what its log says: ``hub.sessions.core``)."""


def check(update: Mapping[str, Any]) -> None:
    """Validate ``update`` as ``SessionState.apply`` would, without folding it anywhere.

    Raises ``InvalidParams`` for what ``apply`` refuses: not an object, no string
    ``sessionUpdate``, a removed v2 name, a malformed known variant. The one state-dependent
    rule is left to ``apply``: a ``pending`` ``_hub_permission`` update without a ``request``
    is accepted here (it is valid when the record already holds one).
    """
    variant = variant_of(update)
    check_variant = CHECKS.get(variant)
    if check_variant is not None:
        check_variant(variant, update)
    elif variant in REMOVED_VARIANTS:
        fail(variant, "removed in ACP v2; it must be translated before folding")


def is_plain_chunk(update: Mapping[str, Any]) -> bool:
    """Whether ``update`` is a message chunk of exactly three fields, ``sessionUpdate``, a
    string ``messageId`` and a plain text block (``{"type": "text", "text": ...}``).

    Most of what an agent streams is such a chunk, and its shape alone makes it valid
    (``check`` passes it, its v1 rendering is itself, it nests two levels): the hot path
    (the dialect, the fold, the v1 rendering) asks this instead of running the checks.
    """
    if type(update) is not dict or len(update) != 3:
        return False
    content = update.get("content")
    return (
        type(content) is dict
        and len(content) == 2
        and content.get("type") == "text"
        and type(content.get("text")) is str
        and type(update.get("messageId")) is str
        and type(variant := update.get("sessionUpdate")) is str  # a list is no set member
        and variant in CHUNKS
    )


def variant_of(update: Mapping[str, Any]) -> str:
    """The ``sessionUpdate`` of ``update``; ``InvalidParams`` when it is not an update."""
    if type(update) is not dict and not isinstance(update, Mapping):
        raise InvalidParams("a session update must be an object")
    variant = update.get("sessionUpdate")
    if not isinstance(variant, str):
        raise InvalidParams("a session update needs a string 'sessionUpdate'")
    return variant


def _with_meta(check_fields: Check) -> Check:
    """``check_fields``, then the ``_meta`` every ACP update may carry (an object when set)."""

    def check_update(variant: str, update: Mapping[str, Any]) -> Any:
        result = check_fields(variant, update)
        optional_object(update, "_meta", variant)
        return result

    return check_update


def _check_tool_content(item: object, variant: str) -> None:
    """A ``ToolCallContent``: ``content`` / ``diff`` / ``terminal`` / ``_x``."""
    if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
        fail(variant, "a tool call content item needs a string 'type'")
    kind = item["type"]
    if kind == "content":
        check_block(item.get("content"), variant)
    elif kind == "diff":
        changes = require_list(item, "changes", variant)
        for change in changes:
            if not isinstance(change, Mapping) or not isinstance(change.get("operation"), str):
                fail(variant, "a diff change needs a string 'operation'")
    elif kind == "terminal":
        require_str(item, "terminalId", variant)


def _check_location(location: object, variant: str) -> None:
    if not isinstance(location, Mapping) or not isinstance(location.get("path"), str):
        fail(variant, "a location needs a string 'path'")


def _check_message_chunk(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "messageId", variant)
    check_block(update.get("content"), variant)


def _check_optional_list(
    update: Mapping[str, Any], key: str, variant: str, check_item: Callable[[Any, str], object]
) -> None:
    """``key`` may be absent or ``null``; otherwise an array whose every item passes."""
    items = update.get(key)
    if items is not None:
        for item in require_list(update, key, variant):
            check_item(item, variant)


def _check_message(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "messageId", variant)
    _check_optional_list(update, "content", variant, check_block)


def _check_tool_call_update(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "toolCallId", variant)
    for key in ("title", "kind", "status"):
        optional_str(update, key, variant)
    _check_optional_list(update, "content", variant, _check_tool_content)
    _check_optional_list(update, "locations", variant, _check_location)


def _check_tool_call_content_chunk(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "toolCallId", variant)
    _check_tool_content(update.get("content"), variant)


def _check_terminal_update(variant: str, update: Mapping[str, Any]) -> bytes | None:
    require_str(update, "terminalId", variant)
    for key in ("command", "cwd"):
        optional_str(update, key, variant)
    exit_status = optional_object(update, "exitStatus", variant)
    if exit_status is not None:
        code = exit_status.get("exitCode")
        if code is not None and not (is_int(code) and code >= 0):
            fail(variant, "'exitStatus.exitCode' must be a non-negative integer")
        optional_str(exit_status, "signal", variant)
    output = update.get("output")
    data: bytes | None = None
    if output is not None:
        if not isinstance(output, Mapping):
            fail(variant, "'output' must be an object")
        data = decode_base64(output.get("data"), variant)
    return data


def _check_terminal_output_chunk(variant: str, update: Mapping[str, Any]) -> bytes:
    require_str(update, "terminalId", variant)
    return decode_base64(update.get("data"), variant)


def _check_plan_update(variant: str, update: Mapping[str, Any]) -> None:
    plan = update.get("plan")
    if not isinstance(plan, Mapping):
        fail(variant, "'plan' must be an object")
    kind = require_str(plan, "type", variant)
    require_str(plan, "planId", variant)
    if kind in _UNSTABLE_PLAN_TYPES:
        fail(variant, f"plan type '{kind}' is not part of stable ACP v2")
    if kind == "items":
        for entry in require_list(plan, "entries", variant):
            if not isinstance(entry, Mapping) or not all(
                isinstance(entry.get(key), str) for key in ("content", "priority", "status")
            ):
                fail(variant, "a plan entry needs string 'content', 'priority' and 'status'")


def _check_available_commands_update(variant: str, update: Mapping[str, Any]) -> None:
    for command in require_list(update, "availableCommands", variant):
        if not isinstance(command, Mapping) or not (
            isinstance(command.get("name"), str) and isinstance(command.get("description"), str)
        ):
            fail(variant, "a command needs string 'name' and 'description'")
        optional_object(command, "input", variant)


def _check_config_option_update(variant: str, update: Mapping[str, Any]) -> None:
    for option in require_list(update, "configOptions", variant):
        if not isinstance(option, Mapping) or not all(
            isinstance(option.get(key), str) for key in ("configId", "name", "type")
        ):
            fail(variant, "a config option needs string 'configId', 'name' and 'type'")


def _check_session_info_update(variant: str, update: Mapping[str, Any]) -> None:
    optional_str(update, "title", variant)
    optional_str(update, "updatedAt", variant)


def _check_usage_update(variant: str, update: Mapping[str, Any]) -> None:
    for key in ("used", "size"):
        value = update.get(key)
        if not (is_int(value) and value >= 0):
            fail(variant, f"'{key}' must be a non-negative integer")
    cost = update.get("cost")
    if cost is not None:
        if not isinstance(cost, Mapping):
            fail(variant, "'cost' must be an object")
        amount = cost.get("amount")
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            fail(variant, "'cost.amount' must be a number")
        require_str(cost, "currency", variant)


def _check_state_update(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "state", variant)
    optional_str(update, "stopReason", variant)


def _check_presence(variant: str, update: Mapping[str, Any]) -> None:
    """The full form has ``clients``; the delta form ``added`` and ``removed`` instead."""
    if "clients" in update or "added" not in update:
        records = require_list(update, "clients", variant)
    else:
        records = require_list(update, "added", variant)
        for client_id in require_list(update, "removed", variant):
            if not isinstance(client_id, str):
                fail(variant, "'removed' must list client ids (strings)")
    for client in records:
        if not isinstance(client, Mapping) or not isinstance(client.get("clientId"), str):
            fail(variant, "a client needs a string 'clientId'")
    for key in ("count", "viewers"):
        value = update.get(key)
        if value is not None and not is_int(value):
            fail(variant, f"'{key}' must be an integer")


def _check_queue(variant: str, update: Mapping[str, Any]) -> None:
    for entry in require_list(update, "entries", variant):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("queueId"), str):
            fail(variant, "a queue entry needs a string 'queueId'")


def _check_agent(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "agent", variant)
    status = require_str(update, "status", variant)
    if status not in _AGENT_STATUSES:
        fail(variant, f"unknown agent status '{status}'")
    code = update.get("exitCode")
    if code is not None and not is_int(code):
        fail(variant, "'exitCode' must be an integer")
    optional_str(update, "signal", variant)
    optional_str(update, "message", variant)
    optional_str(update, "methodId", variant)


def _check_lease(variant: str, update: Mapping[str, Any]) -> None:
    if "holder" not in update:
        fail(variant, "'holder' is required (null when nobody holds the lease)")
    holder = update["holder"]
    if holder is not None and (
        not isinstance(holder, Mapping) or not isinstance(holder.get("clientId"), str)
    ):
        fail(variant, "'holder' must be null or an object with a string 'clientId'")
    optional_str(update, "expiresAt", variant)


def _check_policy(variant: str, update: Mapping[str, Any]) -> None:
    for key, allowed in (("prompt", _PROMPT_POLICIES), ("permission", _PERMISSION_POLICIES)):
        value = update.get(key)
        # A string first: a list or an object is not hashable, so not a set member to test.
        if not isinstance(value, str) or value not in allowed:
            fail(variant, f"'{key}' must be one of {sorted(allowed)}")
    quorum = update.get("quorum")
    if quorum is not None and (not isinstance(quorum, int) or isinstance(quorum, bool)):
        fail(variant, "'quorum' must be an integer")


def _check_hub_prompt(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "messageId", variant)
    require_str(update, "clientId", variant)
    optional_str(update, "name", variant)


def _check_hub_permission(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "permissionId", variant)
    status = require_str(update, "status", variant)
    if status not in _PERMISSION_STATUSES:
        fail(variant, f"unknown permission status '{status}'")
    for key in ("request", "resolvedBy", "outcome"):
        optional_object(update, key, variant)


def _check_hub_reset(variant: str, update: Mapping[str, Any]) -> None:
    require_str(update, "reason", variant)
    if not is_int(update.get("epoch")):
        fail(variant, "'epoch' must be an integer")


HUB_SNAPSHOTS: Final = frozenset({"_hub_queue", "_hub_agent", "_hub_lease", "_hub_policy"})
"""The hub's snapshot variants: each replaces the previous one of its name."""

CHECKS: Final[Mapping[str, Check]] = {
    **dict.fromkeys(CHUNKS, _with_meta(_check_message_chunk)),
    **dict.fromkeys(MESSAGES, _with_meta(_check_message)),
    "tool_call_update": _with_meta(_check_tool_call_update),
    "tool_call_content_chunk": _with_meta(_check_tool_call_content_chunk),
    "terminal_update": _with_meta(_check_terminal_update),
    "terminal_output_chunk": _with_meta(_check_terminal_output_chunk),
    "plan_update": _with_meta(_check_plan_update),
    "available_commands_update": _with_meta(_check_available_commands_update),
    "config_option_update": _with_meta(_check_config_option_update),
    "session_info_update": _with_meta(_check_session_info_update),
    "usage_update": _with_meta(_check_usage_update),
    "state_update": _with_meta(_check_state_update),
    "_hub_presence": _check_presence,
    "_hub_queue": _check_queue,
    "_hub_prompt": _check_hub_prompt,
    "_hub_permission": _check_hub_permission,
    "_hub_agent": _check_agent,
    "_hub_lease": _check_lease,
    "_hub_policy": _check_policy,
    "_hub_reset": _check_hub_reset,
}
"""The check of every known variant (every name of ``V2_UPDATES`` and ``HUB_UPDATES``)."""
