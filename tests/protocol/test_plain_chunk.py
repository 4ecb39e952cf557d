"""``is_plain_chunk``: the hot path's test for the most common update, which lets the dialect,
the fold and the v1 rendering skip their checks. Whatever it accepts must be what the checks
accept, fold and render exactly as the checked path does."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol.checks import check, is_plain_chunk
from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.state import SessionState
from tests.protocol import strategies as sts

PLAIN = {
    "sessionUpdate": "agent_message_chunk",
    "messageId": "m-1",
    "content": {"type": "text", "text": "hello"},
}


def _slow(update: dict[str, Any]) -> dict[str, Any]:
    """The same chunk with an empty ``_meta`` of its own: a fourth field, so every layer takes
    its checked path (a chunk's ``_meta`` is its own: the fold keeps none of it)."""
    return {**update, "_meta": {}}


@pytest.mark.parametrize("variant", ["agent_message_chunk", "agent_thought_chunk"])
def test_a_plain_chunk_is_accepted(variant: str) -> None:
    assert is_plain_chunk({**PLAIN, "sessionUpdate": variant})
    assert is_plain_chunk({**PLAIN, "sessionUpdate": "user_message_chunk"})


@pytest.mark.parametrize(
    "update",
    [
        {**PLAIN, "_meta": {}},
        {**PLAIN, "sessionUpdate": "agent_message"},
        {**PLAIN, "sessionUpdate": "_vendor_chunk"},
        {**PLAIN, "sessionUpdate": []},
        {**PLAIN, "sessionUpdate": {"agent_message_chunk": 1}},
        {**PLAIN, "messageId": None},
        {**PLAIN, "messageId": 7},
        {k: v for k, v in PLAIN.items() if k != "messageId"} | {"x": "m-1"},
        {**PLAIN, "content": {"type": "text", "text": 5}},
        {**PLAIN, "content": {"type": "text", "text": "a", "annotations": {}}},
        {**PLAIN, "content": {"type": "image", "text": "a"}},
        {**PLAIN, "content": {"type": "text", "data": "a"}},
        {**PLAIN, "content": [{"type": "text", "text": "a"}]},
        {**PLAIN, "content": "hello"},
    ],
)
def test_anything_else_takes_the_checked_path(update: dict[str, Any]) -> None:
    assert not is_plain_chunk(update)


def test_a_mapping_that_is_not_a_dict_takes_the_checked_path() -> None:
    class Frozen(dict[str, Any]):
        pass

    assert not is_plain_chunk(Frozen(PLAIN))


@given(st.one_of(sts.mutated_updates(2), sts.message_chunks(), sts.golden_update(2)))
def test_what_it_accepts_the_checks_accept_and_the_fast_path_changes_nothing(update: Any) -> None:
    if not is_plain_chunk(update):
        return
    check(update)  # valid: raises nothing
    original = copy.deepcopy(update)
    fast, slow = SessionState(), SessionState()
    fast.fold_plain_chunk(update)
    slow.apply(_slow(update))
    assert fast.snapshot() == slow.snapshot()
    renderer, checked = ClientV1Renderer(), ClientV1Renderer()
    rendered = renderer.update(update)
    assert rendered == [update]
    slow_rendered = checked.update(_slow(update))
    assert [{k: v for k, v in u.items() if k != "_meta"} for u in slow_rendered] == [update]
    assert update == original  # nothing was changed in place


def test_the_fast_path_remembers_the_message_for_a_later_v1_replacement() -> None:
    """The v1 rendering of a whole message after its chunks replaces what the chunks showed
    (``replaces``): the fast path records the chunk's message as sent, as the checked one does."""
    fast, checked = ClientV1Renderer(), ClientV1Renderer()
    fast.plain_chunk(PLAIN)
    checked.update(_slow(PLAIN))
    whole = {"sessionUpdate": "agent_message", "messageId": "m-1", "content": [PLAIN["content"]]}
    assert fast.update(whole) == checked.update(whole)
    assert fast.update(whole)[0]["_meta"]["acp-hub"]["replaces"] == "m-1"
