"""The protocol core under hostile input: the wire strategies of ``strategies.py`` (golden
fixtures and their mutations, client messages, junk frames) never make it raise anything but
the peer's error, and a refused input changes nothing."""

from __future__ import annotations

import os
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.checks import check
from hub.protocol.client_v1 import ClientV1Renderer
from hub.protocol.compact import compact
from hub.protocol.errors import PeerError
from hub.protocol.jsonrpc import Batch, ErrorResponse, Invalid, Notification, Request, encode, parse
from hub.protocol.state import SessionState
from tests.protocol import strategies as sts

# More with ACP_HUB_FUZZ_EXAMPLES=10000 (the default keeps the suite quick).
FUZZ = settings(max_examples=int(os.environ.get("ACP_HUB_FUZZ_EXAMPLES", "150")), deadline=None)


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
    parse(sts.encode_any(message))


@given(sts.golden_update(1))
def test_golden_v1_updates_translate_and_fold(update: dict[str, Any]) -> None:
    state = SessionState()
    for v2 in AgentV1Translator().update(update):
        state.apply(v2)


@given(sts.golden_update(2))
def test_golden_v2_updates_fold_and_render(update: dict[str, Any]) -> None:
    SessionState().apply(update)
    ClientV1Renderer().update(update)


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


@FUZZ
@given(st.lists(sts.mutated_updates(1), min_size=1, max_size=4))
def test_mutated_v1_updates_are_translated_or_refused_without_a_trace(updates: list[Any]) -> None:
    translator, state = AgentV1Translator(id_prefix="f-"), SessionState()
    for update in updates:
        try:
            translated = translator.update(update)
        except PeerError:
            continue
        for v2 in translated:
            try:
                state.apply(v2)
            except PeerError:
                pass  # the fold checks more than translation needs
