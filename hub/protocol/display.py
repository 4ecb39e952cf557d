"""What the hub bounds or checks before people see it: session titles and the user messages it
attributes to a person.

An agent's words are untrusted. A title is clamped (``TITLE_MAX_CHARS``) so that no title can
fill a page. A user message is a person's only when its content is what that person sent:
``matches_prompt`` compares what the agent echoes with the prompt the hub forwarded, and
``extends_prompt`` accepts the echo streamed in chunks as long as it stays a prefix of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["TITLE_MAX_CHARS", "clamp_title", "extends_prompt", "matches_prompt"]

TITLE_MAX_CHARS: Final = 200
"""The longest session title the hub keeps (characters); a longer one ends with ``…``."""

_IGNORED: Final = frozenset({"_meta", "annotations"})


def clamp_title(update: Mapping[str, Any]) -> Mapping[str, Any]:
    """``update`` (a ``session_info_update``) with its ``title`` clamped to
    ``TITLE_MAX_CHARS``; ``update`` itself when there is nothing to clamp."""
    title = update.get("title")
    if not isinstance(title, str) or len(title) <= TITLE_MAX_CHARS:
        return update
    return {**update, "title": title[: TITLE_MAX_CHARS - 1] + "\u2026"}


def _normal(blocks: Sequence[Any]) -> list[Any]:
    """Content blocks compared by what they say: adjacent text merged, ``_meta`` and
    ``annotations`` left out."""
    out: list[Any] = []
    for block in blocks:
        if isinstance(block, Mapping) and block.get("type") == "text":
            value = str(block.get("text", ""))
            if out and isinstance(out[-1], str):
                out[-1] += value
            else:
                out.append(value)
        elif isinstance(block, Mapping):
            out.append({k: v for k, v in block.items() if k not in _IGNORED})
        else:
            out.append(block)
    return out


def matches_prompt(content: Sequence[Any], sent: Sequence[Any]) -> bool:
    """Whether ``content`` (a user message) says exactly what the prompt ``sent`` said."""
    return _normal(content) == _normal(sent)


def extends_prompt(content: Sequence[Any], sent: Sequence[Any]) -> bool:
    """Whether ``content`` is the start of ``sent`` (a user message being streamed in chunks
    that, so far, says only what the prompt said)."""
    have, want = _normal(content), _normal(sent)
    if len(have) > len(want):
        return False
    if not have:
        return True
    *head, last = have
    if head != want[: len(head)]:
        return False
    target = want[len(head)]
    if isinstance(last, str):
        return isinstance(target, str) and target.startswith(last)
    return bool(last == target)
