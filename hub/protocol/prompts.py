"""The prompt turn across versions: the prompt a v1 agent is sent, the stop reason a v1 client
is told (https://agentclientprotocol.com/protocol/v2/migration#the-new-prompt-lifecycle)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hub.protocol.content import block_v2_to_v1
from hub.protocol.errors import TranslationError
from hub.protocol.shapes import check_block
from hub.protocol.variants import V1_CONTENT_TYPES, V1_STOP_REASONS

__all__ = ["prompt_v2_to_v1", "stop_reason_for_v1"]


def prompt_v2_to_v1(blocks: Sequence[Any]) -> list[dict[str, Any]]:
    """v2 prompt content for a v1 agent: ``resource_link.icons`` stripped.

    A block type v1 does not define raises ``TranslationError``.
    """
    out = []
    for i, raw in enumerate(blocks):
        block = check_block(raw, f"prompt[{i}]")
        if block["type"] not in V1_CONTENT_TYPES:
            raise TranslationError(f"prompt[{i}]: content type '{block['type']}' has no v1 form")
        out.append(block_v2_to_v1(block, f"prompt[{i}]"))
    return out


def stop_reason_for_v1(reason: str) -> str:
    """A v2 stop reason for a v1 client: the v1 enum is closed, others become ``end_turn``."""
    return reason if reason in V1_STOP_REASONS else "end_turn"
