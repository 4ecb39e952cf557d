"""The protocol core under hostile input: the wire strategies of ``strategies.py`` (golden
fixtures and their mutations, client messages, junk frames) never make it raise anything but
the peer's error, and a refused input changes nothing."""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.checks import check, variant_of
from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.compact import compact
from hub.protocol.errors import PeerError
from hub.protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    Invalid,
    Notification,
    Request,
    encode,
    is_request_id,
    parse,
)
from hub.protocol.state import SessionState
from hub.protocol.variants import REMOVED_VARIANTS
from tests.protocol import strategies as sts
from tests.protocol.translation import schema

# More with ACP_HUB_FUZZ_EXAMPLES=10000 (the default keeps the suite quick).
FUZZ = settings(max_examples=int(os.environ.get("ACP_HUB_FUZZ_EXAMPLES", "150")), deadline=None)


@pytest.mark.slow
@pytest.mark.timeout(300)
@FUZZ
@given(sts.frames(), st.booleans())
def test_parse_answers_every_frame(data: bytes, allow_batch: bool) -> None:
    parsed = parse(data, allow_batch=allow_batch)
    entries = parsed.entries if isinstance(parsed, Batch) else (parsed,)
    assert len(entries) <= 32
    for entry in entries:
        if isinstance(entry, Invalid | ErrorResponse):
            answer = orjson.loads(encode(entry))  # every refusal is an encodable answer
            assert answer["error"]["code"] in (-32700, -32600, -32602)


@given(sts.client_calls())
def test_client_calls_are_well_formed(message: dict[str, Any]) -> None:
    entry = parse(orjson.dumps(message))
    assert isinstance(entry, Request | Notification)
    assert entry.method == message["method"]


@given(sts.client_messages())
def test_client_messages_encode_and_parse_without_raising(message: Any) -> None:
    entry = parse(sts.encode_any(message))
    assert not isinstance(entry, Batch)  # a batch only where batches are allowed
    if isinstance(entry, Invalid):
        answer = orjson.loads(encode(entry))  # answered, with the message's id where valid
        assert answer["error"]["code"] in (-32700, -32600, -32602)
        sent_id = message.get("id") if isinstance(message, dict) else None
        assert answer["id"] == (sent_id if is_request_id(sent_id) else None)
    else:
        assert parse(encode(entry)) == entry  # what is read is what would be sent on


@given(sts.golden_update(1))
def test_golden_v1_updates_translate_and_fold(update: dict[str, Any]) -> None:
    state = SessionState()
    translated = AgentV1Translator().update(update)
    assert translated, update
    for v2 in translated:
        assert list(sts.session_update_validator().iter_errors(v2)) == [], v2
        state.apply(v2)
    assert SessionState().apply_all(compact(state)).snapshot() == state.snapshot()


@given(sts.golden_update(2))
def test_golden_v2_updates_fold_and_render(update: dict[str, Any]) -> None:
    state = SessionState()
    state.apply(update)
    assert SessionState().apply_all(compact(state)).snapshot() == state.snapshot()
    for v1 in ClientV1Renderer().update(update):
        if not variant_of(v1).startswith("_hub_"):  # the hub's own pass through to v1 clients
            schema("v1").check("SessionUpdate", v1)


@pytest.mark.slow
@pytest.mark.timeout(300)
@FUZZ
@given(st.lists(sts.mutated_updates(2), min_size=1, max_size=4))
def test_mutated_v2_updates_are_folded_or_refused_without_a_trace(updates: list[Any]) -> None:
    state, renderer = SessionState(), ClientV1Renderer()
    for update in updates:
        before = state.snapshot()
        try:
            check(update)
            state.apply(update)
        except PeerError:
            assert state.snapshot() == before  # a refused update changes nothing
            continue
        try:
            renderer.update(update)
        except PeerError:
            pass  # the renderer checks some shapes the fold does not need
    assert SessionState().apply_all(compact(state)).snapshot() == state.snapshot()


@pytest.mark.slow
@pytest.mark.timeout(300)
@FUZZ
@given(st.lists(sts.mutated_updates(1), min_size=1, max_size=4))
def test_mutated_v1_updates_are_translated_or_refused_without_a_trace(updates: list[Any]) -> None:
    translator, state = AgentV1Translator(id_prefix="f-"), SessionState()

    def options() -> tuple[list[dict[str, Any]], str | None]:
        return translator.config_options, translator.mode_option_id

    for update in updates:
        options_before = options()
        try:
            translated = translator.update(update)
        except PeerError:
            assert options() == options_before  # a refused update changes no option or mode
            continue
        for v2 in translated:
            assert variant_of(v2) not in REMOVED_VARIANTS, v2  # never a name v2 dropped
            folded = state.snapshot()
            try:
                state.apply(v2)
            except PeerError:
                # the fold checks more than translation needs, and refuses without a trace
                assert state.snapshot() == folded
    assert SessionState().apply_all(compact(state)).snapshot() == state.snapshot()
