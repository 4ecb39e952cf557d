"""Tool calls across versions: content items and the fields of a tool-call update.

v1 announces a tool call with ``tool_call`` and patches it with ``tool_call_update``, where a
``null`` means "not provided"; v2 has one upsert, ``tool_call_update``, whose ``null`` clears
(https://agentclientprotocol.com/protocol/v2/migration#tool-calls). v1 diffs carry whole texts,
v2 diffs a list of changes and a patch (``hub.protocol.patch``); v2 terminals are the agent's
own and have no v1 form (``hub.protocol.terminal`` renders their text).

The losses towards v1 (``tool_fields_v2_to_v1``): ``null`` collections become ``[]``;
``null`` title, status, raw input/output and ``_meta`` are omitted, so the client keeps its
old value; a ``null`` kind becomes ``other`` (the v1 default). Status ``cancelled`` becomes
``failed`` and an unknown status is omitted; unknown kinds become ``other``. The original
value is kept in ``_meta["acp-hub"]`` (``status`` / ``kind``). A v2 diff becomes a text
block holding the patch, or a description of the changes when there is no patch; a single
pure text ``add`` becomes a v1 diff with ``newText`` rebuilt from the patch. Unknown content
items become a text placeholder with the original in ``_meta["acp-hub"].item``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from hub.protocol.content import block_v2_to_v1, text
from hub.protocol.patch import added_text, git_patch
from hub.protocol.shapes import (  # Structural: the shape checks used here, one by one.
    check_block,
    copy_meta,
    fail,
    optional_str,
    require_list,
    require_object,
    require_objects,
    require_str,
    with_hub_meta,
)
from hub.protocol.variants import V1_TOOL_KINDS, V1_TOOL_STATUSES

__all__ = [
    "TOOL_TITLE",
    "diff_v2_to_v1",
    "tool_content_v1_to_v2",
    "tool_fields_v1_to_v2",
    "tool_fields_v2_to_v1",
    "tool_item_v2_to_v1",
]

TOOL_TITLE: Final = "Tool call"
"""Title of a v1 ``tool_call`` whose v2 source carried none (v1 requires one)."""


# --- v1 -> v2 ---------------------------------------------------------------------------------


def tool_content_v1_to_v2(item: Any, where: str) -> dict[str, Any]:
    """A v1 ``ToolCallContent`` item as v2: a diff becomes changes plus a git patch; terminal
    content is refused (``InvalidParams``): the hub offers agents no client terminals."""
    obj = require_object(item, where)
    kind = require_str(obj, "type", where)
    if kind == "content":
        check_block(obj.get("content"), f"{where}.content")
        return dict(obj)
    if kind == "diff":
        path = require_str(obj, "path", where)
        new_text = require_str(obj, "newText", where)
        old_text = optional_str(obj, "oldText", where)
        change = {"operation": "add" if old_text is None else "modify", "path": path}
        change["fileType"] = "text"
        out: dict[str, Any] = {
            "type": "diff",
            "changes": [change],
            "patch": {"format": "git_patch", "text": git_patch(path, old_text, new_text)},
        }
        return copy_meta(obj, out)
    if kind == "terminal":
        # The hub never advertises client terminals to agents (docs/agents.md), so this
        # names a terminal nobody created; a v2 terminal id would mean something else.
        fail(where, "terminal content needs the client terminal capability, not offered")
    return dict(obj)  # an unknown item type: the v2 union is open, keep it as it is


def tool_fields_v1_to_v2(update: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A v1 ``ToolCallUpdate`` as v2 fields: nulls stripped, content translated.

    v1 has no clear operation ("only changed fields need to be included"), so a v1 null
    means "not provided"; passed on, it would clear the field in v2.
    """
    out: dict[str, Any] = {"toolCallId": require_str(update, "toolCallId", where)}
    for key, value in update.items():
        if key in ("sessionUpdate", "toolCallId") or value is None:
            continue
        if key in ("title", "kind", "status"):
            require_str(update, key, where)
        elif key == "content":
            value = [
                tool_content_v1_to_v2(item, f"{where}.content[{i}]")
                for i, item in enumerate(require_list(update, key, where))
            ]
        elif key == "locations":
            require_objects(update, key, where)
        out[key] = value
    return out


# --- v2 -> v1 ---------------------------------------------------------------------------------


def diff_v2_to_v1(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A v2 diff item as v1: a v1 diff for one pure text addition, else a text block."""
    changes = require_objects(item, "changes", where)
    for i, change in enumerate(changes):
        require_str(change, "operation", f"{where}.changes[{i}]")
        require_str(change, "path", f"{where}.changes[{i}]")
    patch = item.get("patch")
    patch_text: str | None = None
    if patch is not None:
        patch = require_object(patch, f"{where}.patch")
        require_str(patch, "format", f"{where}.patch")
        patch_text = require_str(patch, "text", f"{where}.patch")
    if (
        patch_text is not None
        and patch is not None
        and patch["format"] == "git_patch"
        and len(changes) == 1
        and changes[0]["operation"] == "add"
        and changes[0].get("fileType") in (None, "text")
    ):
        new_text = added_text(patch_text)
        if new_text is not None:
            return copy_meta(
                item, {"type": "diff", "path": changes[0]["path"], "newText": new_text}
            )
    if patch_text is None:
        lines = []
        for change in changes:
            old = change.get("oldPath")
            source = f"{old} -> " if isinstance(old, str) else ""
            lines.append(f"{change['operation']} {source}{change['path']}")
        patch_text = "\n".join(lines)
    return with_hub_meta(
        {"type": "content", "content": text(patch_text)},
        diff={"changes": [dict(c) for c in changes]},
    )


def tool_item_v2_to_v1(value: Any, where: str, terminal: Callable[[str], str]) -> dict[str, Any]:
    """A v2 tool-call content item as v1; ``terminal(terminal_id)`` gives the text that
    stands for a terminal."""
    item = require_object(value, where)
    kind = require_str(item, "type", where)
    if kind == "content":
        out = {
            "type": "content",
            "content": block_v2_to_v1(item.get("content"), f"{where}.content"),
        }
        return copy_meta(item, out)
    if kind == "diff":
        return diff_v2_to_v1(item, where)
    if kind == "terminal":
        terminal_id = require_str(item, "terminalId", where)
        out = {"type": "content", "content": text(terminal(terminal_id))}
        return with_hub_meta(out, terminalId=terminal_id)
    return with_hub_meta(
        {"type": "content", "content": text(f"[unsupported tool call content: {kind}]")},
        item=dict(item),
    )


def tool_fields_v2_to_v1(
    update: Mapping[str, Any], where: str, *, first: bool, content: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """v2 tool-call patch fields as v1 (see the module docstring for the losses)."""
    out: dict[str, Any] = {"toolCallId": require_str(update, "toolCallId", where)}
    hub: dict[str, Any] = {}
    title = optional_str(update, "title", where)
    if title is not None:
        out["title"] = title
    elif first:
        out["title"] = TOOL_TITLE
    kind = optional_str(update, "kind", where)
    if kind is not None:
        out["kind"] = kind if kind in V1_TOOL_KINDS else "other"
        if kind not in V1_TOOL_KINDS:
            hub["kind"] = kind
    elif "kind" in update and not first:
        out["kind"] = "other"  # a cleared kind reads as the v1 default
    status = optional_str(update, "status", where)
    if status is not None and status in V1_TOOL_STATUSES:
        out["status"] = status
    elif status is not None:
        hub["status"] = status
        if status == "cancelled":
            out["status"] = "failed"
    if content is not None:
        out["content"] = content
    if "locations" in update:
        locations = update["locations"]
        out["locations"] = (
            []
            if locations is None
            else [dict(x) for x in require_objects(update, "locations", where)]
        )
    for key in ("rawInput", "rawOutput", "_meta"):
        if update.get(key) is not None:
            out[key] = update[key]
    if hub:
        with_hub_meta(out, **hub)
    return out
