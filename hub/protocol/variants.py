"""The names of things: every ``sessionUpdate`` variant set and the closed v1 enums.

One definition each, for the fold (``hub.protocol.state``), its checks
(``hub.protocol.checks``), the translators and the agents layer. The v1 union of session
updates is closed, the v2 union is open (unknown names are kept); see
https://agentclientprotocol.com/protocol/v2/migration for what changed between them, and
``docs/internals.md`` for the hub's own ``_hub_*`` variants.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "CHUNKS",
    "CHUNK_OF_MESSAGE",
    "HUB_UPDATES",
    "MESSAGES",
    "MESSAGE_OF_CHUNK",
    "REMOVED_VARIANTS",
    "SAME_IN_BOTH",
    "V1_CONTENT_TYPES",
    "V1_PERMISSION_KINDS",
    "V1_PLAN_PRIORITIES",
    "V1_PLAN_STATUSES",
    "V1_STOP_REASONS",
    "V1_TOOL_KINDS",
    "V1_TOOL_STATUSES",
    "V1_UPDATES",
    "V2_UPDATES",
]

MESSAGE_OF_CHUNK: Final[Mapping[str, str]] = {
    "user_message_chunk": "user_message",
    "agent_message_chunk": "agent_message",
    "agent_thought_chunk": "agent_thought",
}
"""Each message chunk variant (v1 and v2) and the kind of message it appends to."""

CHUNK_OF_MESSAGE: Final[Mapping[str, str]] = {
    message: chunk for chunk, message in MESSAGE_OF_CHUNK.items()
}
"""Each v2 whole-message upsert and the chunk variant that streams the same kind."""

CHUNKS: Final = frozenset(MESSAGE_OF_CHUNK)
"""The message chunk variants, the same in v1 and v2."""

MESSAGES: Final = frozenset(CHUNK_OF_MESSAGE)
"""The v2 whole-message upserts (``user_message``, ``agent_message``, ``agent_thought``)."""

SAME_IN_BOTH: Final = frozenset({"session_info_update", "usage_update"})
"""Variants with one shape in v1 and v2: translated by a check and a copy."""

V1_UPDATES: Final = frozenset(
    {
        *CHUNKS,
        *SAME_IN_BOTH,
        "tool_call",
        "tool_call_update",
        "plan",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
    }
)
"""The closed v1 union of session updates."""

V2_UPDATES: Final = frozenset(
    {
        *CHUNKS,
        *MESSAGES,
        *SAME_IN_BOTH,
        "state_update",
        "tool_call_content_chunk",
        "tool_call_update",
        "terminal_update",
        "terminal_output_chunk",
        "plan_update",
        "available_commands_update",
        "config_option_update",
    }
)
"""The named variants of the (open) v2 union."""

REMOVED_VARIANTS: Final = V1_UPDATES - V2_UPDATES
"""The v1 names that v2 removed (``tool_call``, ``plan``, ``current_mode_update``): they must
have been translated before they reach a v2 fold, and a v2 peer must not send them."""

HUB_UPDATES: Final = frozenset(
    {
        "_hub_presence",
        "_hub_queue",
        "_hub_prompt",
        "_hub_permission",
        "_hub_agent",
        "_hub_lease",
        "_hub_policy",
        "_hub_reset",
    }
)
"""The hub's own variants (``docs/internals.md``, "Hub update variants")."""

# The closed enums of v1 (v2 made each of them open).
V1_STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}
)
V1_TOOL_STATUSES: Final = frozenset({"pending", "in_progress", "completed", "failed"})
V1_TOOL_KINDS: Final = frozenset(
    {
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    }
)
V1_PLAN_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})
V1_PLAN_PRIORITIES: Final = frozenset({"high", "medium", "low"})
V1_CONTENT_TYPES: Final = frozenset({"text", "image", "audio", "resource_link", "resource"})
V1_PERMISSION_KINDS: Final = frozenset(
    {"allow_once", "allow_always", "reject_once", "reject_always"}
)
