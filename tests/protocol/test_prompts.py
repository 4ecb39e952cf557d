"""Prompts for v1 agents and stop reasons for v1 clients."""

from __future__ import annotations

import pytest

from hub.protocol.errors import InvalidParams, TranslationError
from hub.protocol.prompts import prompt_v2_to_v1, stop_reason_for_v1
from tests.protocol.translation import (
    Schema,
    text,
)


def test_prompt_v2_to_v1(v1: Schema) -> None:
    link = {"type": "resource_link", "name": "a", "uri": "file:///a", "icons": [{"src": "x"}]}
    out = prompt_v2_to_v1([text("hi"), link])
    assert out == [text("hi"), {"type": "resource_link", "name": "a", "uri": "file:///a"}]
    for block in out:
        v1.check("ContentBlock", block)
    assert link["icons"] == [{"src": "x"}]
    with pytest.raises(TranslationError):
        prompt_v2_to_v1([{"type": "_acme_sketch"}])
    with pytest.raises(InvalidParams):
        prompt_v2_to_v1(["hi"])


@pytest.mark.parametrize(
    ("reason", "v1_reason"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("max_turn_requests", "max_turn_requests"),
        ("refusal", "refusal"),
        ("cancelled", "cancelled"),
        ("_acme_budget", "end_turn"),
        ("paused", "end_turn"),
    ],
)
def test_stop_reason_for_v1(reason: str, v1_reason: str, v1: Schema) -> None:
    assert stop_reason_for_v1(reason) == v1_reason
    v1.check("StopReason", v1_reason)
