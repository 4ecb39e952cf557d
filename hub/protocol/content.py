"""Content blocks across versions (https://agentclientprotocol.com/protocol/v2/content).

v1 knows five block types (``text``, ``image``, ``audio``, ``resource_link``, ``resource``);
v2's union is open. ``block_v2_to_v1`` renders any v2 block for a v1 peer: a type v1 does
not define becomes a text placeholder that keeps the original in ``_meta["acp-hub"].block``.
"""

from __future__ import annotations

from typing import Any

from hub.protocol.shapes import check_block, with_hub_meta
from hub.protocol.variants import V1_CONTENT_TYPES

__all__ = ["block_v2_to_v1", "text"]


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def block_v2_to_v1(value: Any, where: str) -> dict[str, Any]:
    """A v2 content block as v1 (``resource_link.icons`` is v2 only); ``InvalidParams`` when
    ``value`` is not a content block."""
    block = check_block(value, where)
    kind = block["type"]
    if kind not in V1_CONTENT_TYPES:
        return with_hub_meta(text(f"[unsupported content: {kind}]"), block=dict(block))
    out = dict(block)
    if kind == "resource_link":
        out.pop("icons", None)  # v2 only
    return out
