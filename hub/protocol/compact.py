"""Compaction: the fewest v2 updates that rebuild a session's folded state.

Theory of operation
-------------------
A late joiner should not replay a session's whole history: its cost would grow with the
number of updates, not with the size of what there is to show. ``compact(state)`` reads the
canonical snapshot of a ``SessionState`` and emits, in this order:

1. the session-wide snapshots: ``session_info_update``, ``config_option_update``,
   ``available_commands_update``, ``usage_update``, then the hub's ``_hub_policy``,
   ``_hub_lease``, ``_hub_presence``, ``_hub_queue`` and ``_hub_agent``;
2. the timeline in first-appearance order: one whole-message upsert per message (preceded by
   its ``_hub_prompt`` attribution, if any) and one full ``tool_call_update`` per tool call;
   attributions of messages that are not (or no longer) in the timeline follow it;
3. one ``terminal_update`` per terminal (its output as one base64 snapshot, its exit status),
   one ``plan_update`` per plan, one ``_hub_permission`` per permission record (its final,
   merged form), the latest update of each unknown variant;
4. last, the ``state_update``, so a client that replays ends in the current foreground state.

The invariant, checked by property tests over generated streams:
``SessionState().apply_all(compact(s)).snapshot() == s.snapshot()``.
"""

from __future__ import annotations

from typing import Any, Final

from hub.protocol.state import SessionState

__all__ = ["compact"]

# The order of the session-wide snapshots: the client sees the session's shape (options,
# commands) and who is around before the conversation itself.
_HUB_ORDER: Final = ("_hub_policy", "_hub_lease", "_hub_presence", "_hub_queue", "_hub_agent")


def compact(state: SessionState) -> list[dict[str, Any]]:
    """The fewest v2 (and ``_hub_*``) update objects whose fold equals ``state``.

    An empty state compacts to ``[]``. The returned updates share leaf values (content
    blocks, raw inputs) with the state; treat them as read-only.
    """
    snap = state.snapshot()
    out: list[dict[str, Any]] = []
    if snap["info"]:
        out.append({"sessionUpdate": "session_info_update", **snap["info"]})
    for variant, key in (
        ("config_option_update", "configOptions"),
        ("available_commands_update", "commands"),
        ("usage_update", "usage"),
    ):
        if snap[key] is not None:
            out.append({"sessionUpdate": variant, **snap[key]})
    hub: dict[str, dict[str, Any]] = snap["hub"]
    out.extend(
        {"sessionUpdate": variant, **hub[variant]} for variant in _HUB_ORDER if variant in hub
    )

    prompts: dict[str, dict[str, Any]] = dict(snap["prompts"])
    for entry in snap["timeline"]:
        if entry["type"] == "message":
            prompt = prompts.pop(entry["id"], None)
            if prompt is not None:
                out.append({"sessionUpdate": "_hub_prompt", **prompt})
            out.append(
                {
                    "sessionUpdate": entry["kind"],
                    "messageId": entry["id"],
                    "content": entry["content"],
                    **entry["fields"],
                }
            )
        else:
            out.append(
                {"sessionUpdate": "tool_call_update", "toolCallId": entry["id"], **entry["fields"]}
            )
    out.extend({"sessionUpdate": "_hub_prompt", **prompt} for prompt in prompts.values())

    for terminal_id, terminal in snap["terminals"].items():
        out.append(
            {
                "sessionUpdate": "terminal_update",
                "terminalId": terminal_id,
                **terminal["fields"],
                "output": {"data": terminal["output"]},
            }
        )
    out.extend({"sessionUpdate": "plan_update", **plan} for plan in snap["plans"].values())
    out.extend(
        {"sessionUpdate": "_hub_permission", **record} for record in snap["permissions"].values()
    )
    out.extend(snap["extras"].values())
    if snap["state"] is not None:
        out.append({"sessionUpdate": "state_update", **snap["state"]})
    return out
