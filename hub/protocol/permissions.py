"""Permission requests and their answers across versions.

A v1 request names a tool call (``toolCall``); a v2 request has a ``title``, an optional
``description`` and a ``subject`` (a tool call, a command, or a future kind)
(https://agentclientprotocol.com/protocol/v2/migration#permission-requests). The answer is
checked against the request's options before it reaches the agent: an answer the hub does
not understand never counts as approval.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from hub.protocol.content import text
from hub.protocol.shapes import (  # Structural: the shape checks used here, one by one.
    copy_meta,
    fail,
    optional_str,
    require_list,
    require_object,
    require_objects,
    require_str,
    with_hub_meta,
)
from hub.protocol.tool_calls import tool_fields_v1_to_v2, tool_fields_v2_to_v1, tool_item_v2_to_v1
from hub.protocol.variants import V1_PERMISSION_KINDS

__all__ = [
    "PERMISSION_TITLE",
    "option_kind",
    "permission_outcome_for_agent",
    "permission_request_v1_to_v2",
    "permission_request_v2_to_v1",
]

PERMISSION_TITLE: Final = "Permission requested"
"""Title of a v2 permission request made from a v1 tool call without a title."""


def _permission_options(params: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    options = require_objects(params, "options", where)
    for i, option in enumerate(options):
        for key in ("optionId", "name", "kind"):
            require_str(option, key, f"{where}.options[{i}]")
    return options


def permission_request_v1_to_v2(params: Mapping[str, Any]) -> dict[str, Any]:
    """v1 ``session/request_permission`` params as v2.

    The tool call becomes a ``tool_call`` subject (nulls stripped, diffs translated); its
    title, which v1 agents often fill with the question, becomes the request title.
    """
    where = "params"
    obj = require_object(params, where)
    session_id = require_str(obj, "sessionId", where)
    tool_call = tool_fields_v1_to_v2(
        require_object(obj.get("toolCall"), f"{where}.toolCall"), f"{where}.toolCall"
    )
    options = _permission_options(obj, where)
    if not options:
        fail(where, "'options' must not be empty")
    out = {
        "sessionId": session_id,
        "title": tool_call.get("title", PERMISSION_TITLE),
        "subject": {"type": "tool_call", "toolCall": tool_call},
        "options": [dict(option) for option in options],
    }
    return copy_meta(obj, out)


def permission_request_v2_to_v1(params: Mapping[str, Any]) -> dict[str, Any]:
    """v2 ``session/request_permission`` params as v1.

    A ``tool_call`` subject gives its tool call (titled with the request title when it
    has none); a ``command`` subject becomes an ``execute`` tool call with
    ``rawInput: {command, cwd}`` under the subject's tool call id or a fresh one; no (or
    an unknown) subject gives a fresh tool call carrying the title. The description goes
    into a text content item of a fresh tool call (never into an existing one, whose
    content it would replace). ``_meta["acp-hub"]`` keeps title, description and an
    unknown subject. Options of a kind v1 does not have are left out: no v1 kind says what
    they do, and a client labels a button by its kind (calling an allow ``reject_once``
    would show an allow as a reject). No option left raises ``PeerError``: the request
    cannot be put to a v1 client honestly.
    """
    where = "params"
    obj = require_object(params, where)
    session_id = require_str(obj, "sessionId", where)
    title = require_str(obj, "title", where)
    description = optional_str(obj, "description", where)
    options = _permission_options(obj, where)
    hub: dict[str, Any] = {"title": title}
    if description is not None:
        hub["description"] = description
    fresh = f"hub-permission-{uuid.uuid4().hex}"
    tool: dict[str, Any] = {"toolCallId": fresh, "title": title}
    if obj.get("subject") is not None:
        subject = require_object(obj["subject"], f"{where}.subject")
        kind = require_str(subject, "type", f"{where}.subject")
        if kind == "tool_call":
            source = require_object(subject.get("toolCall"), f"{where}.subject.toolCall")
            content = None
            if source.get("content") is not None:
                content = [
                    tool_item_v2_to_v1(
                        item, f"{where}.subject.toolCall.content[{i}]", _terminal_ref
                    )
                    for i, item in enumerate(
                        require_list(source, "content", f"{where}.subject.toolCall")
                    )
                ]
            tool = tool_fields_v2_to_v1(
                source, f"{where}.subject.toolCall", first=False, content=content
            )
            tool.setdefault("title", title)
        elif kind == "command":
            command = require_str(subject, "command", f"{where}.subject")
            cwd = require_str(subject, "cwd", f"{where}.subject")
            given = optional_str(subject, "toolCallId", f"{where}.subject")
            tool = {
                "toolCallId": given or fresh,
                "title": title,
                "kind": "execute",
                "rawInput": {"command": command, "cwd": cwd},
            }
        else:
            hub["subject"] = dict(subject)
    if description is not None and tool["toolCallId"] == fresh:
        tool["content"] = [{"type": "content", "content": text(description)}]
    v1_options = [dict(option) for option in options if option["kind"] in V1_PERMISSION_KINDS]
    if not v1_options:
        fail(where, "no option has a kind a v1 client knows")
    out = {"sessionId": session_id, "toolCall": tool, "options": v1_options}
    if obj.get("_meta") is not None:
        out["_meta"] = obj["_meta"]
    return with_hub_meta(out, **hub)


def _terminal_ref(terminal_id: str) -> str:
    return f"[terminal {terminal_id}]"


def option_kind(outcome: Mapping[str, Any], options: Sequence[Any]) -> str | None:
    """The ``kind`` of the option a v2 ``outcome`` selects (``allow_once``, ...), or ``None``
    for ``cancelled`` or an option without a string kind: what the answer means, whatever the
    agent named the option."""
    if outcome.get("outcome") != "selected":
        return None
    chosen = outcome.get("optionId")
    for option in options:
        if isinstance(option, Mapping) and option.get("optionId") == chosen:
            kind = option.get("kind")
            return kind if isinstance(kind, str) else None
    return None


def permission_outcome_for_agent(outcome: Any, options: Sequence[Any]) -> dict[str, Any]:
    """Validate a client's permission ``outcome`` object against the request's options.

    Returns the outcome to send to the agent: ``{"outcome": "selected", "optionId"}``
    with an option id of ``options``, or ``{"outcome": "cancelled"}`` (``_meta`` kept).
    Anything else - an unknown outcome, an unknown option, a malformed object - raises
    ``InvalidParams``: an answer the hub does not understand never counts as approval.
    """
    where = "outcome"
    obj = require_object(outcome, where)
    kind = require_str(obj, "outcome", where)
    if kind == "cancelled":
        return copy_meta(obj, {"outcome": "cancelled"})
    if kind != "selected":
        fail(where, f"unknown outcome '{kind}'")
    option_id = require_str(obj, "optionId", where)
    known = [option.get("optionId") for option in options if isinstance(option, Mapping)]
    if option_id not in known:
        fail(where, f"unknown option '{option_id}'")
    return copy_meta(obj, {"outcome": "selected", "optionId": option_id})
