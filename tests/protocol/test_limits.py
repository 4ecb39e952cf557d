"""The limits ``parse`` enforces: JSON nesting depth and batch entries (``docs/limits.md``)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol import errors
from hub.protocol.jsonrpc import (
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DEPTH,
    Batch,
    ErrorResponse,
    Invalid,
    Notification,
    Request,
    Response,
    depth_exceeds,
    encode,
    parse,
)


def nested(levels: int, leaf: Any = 1, *, arrays: bool = False) -> Any:
    """A value ``levels`` containers deep (0: the leaf itself)."""
    value = leaf
    for _ in range(levels):
        value = [value] if arrays else {"a": value}
    return value


def depth(value: Any) -> int:
    """The reference: containers nest this many levels (a scalar is 0)."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def nested_json(levels: int, *, arrays: bool = False) -> str:
    """``nested(levels)`` as JSON text (orjson cannot write more than 254 levels)."""
    return (
        ("[" * levels + "1" + "]" * levels) if arrays else ('{"a":' * levels + "1" + "}" * levels)
    )


def prompt(meta_levels: int, request_id: Any = 1) -> bytes:
    """A ``session/prompt`` whose content block carries ``_meta`` nested ``meta_levels`` deep:
    the message is ``meta_levels + 4`` levels deep (message, params, prompt, block)."""
    block = '{"type":"text","text":"hi","_meta":' + nested_json(meta_levels) + "}"
    return (
        f'{{"jsonrpc":"2.0","id":{orjson.dumps(request_id).decode()},"method":"session/prompt",'
        f'"params":{{"sessionId":"s","prompt":[{block}]}}}}'
    ).encode()


def test_defaults_are_well_under_what_orjson_can_write() -> None:
    assert DEFAULT_MAX_DEPTH == 64
    assert DEFAULT_MAX_BATCH == 32
    # The hub embeds what it receives a few levels deeper in frames of its own: those must
    # still encode (orjson writes at most 254 levels).
    orjson.dumps(nested(DEFAULT_MAX_DEPTH + 10))
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(nested(260))


def test_a_message_at_the_limit_passes_and_one_level_more_is_refused_with_its_id() -> None:
    at_limit = parse(prompt(DEFAULT_MAX_DEPTH - 4, request_id="p-1"))
    assert isinstance(at_limit, Request)
    assert at_limit.id == "p-1"
    refused = parse(prompt(DEFAULT_MAX_DEPTH - 3, request_id="p-2"))
    assert isinstance(refused, Invalid)
    assert refused.id == "p-2"
    assert refused.error.code == errors.INVALID_PARAMS
    assert f"{DEFAULT_MAX_DEPTH} levels" in refused.error.data
    # The answer itself is an ordinary, encodable error response.
    assert orjson.loads(encode(refused))["error"]["code"] == -32602


@pytest.mark.parametrize("levels", [255, 1_000, 1_020])
def test_nesting_orjson_reads_but_cannot_write_is_refused_without_recursion(levels: int) -> None:
    refused = parse(prompt(levels))
    assert isinstance(refused, Invalid)
    assert refused.error.code == errors.INVALID_PARAMS
    # As text, and in arrays only: the same answer.
    arrays = '{"jsonrpc":"2.0","id":3,"method":"m","params":' + nested_json(levels, arrays=True)
    for data in (prompt(levels).decode(), arrays + "}"):
        entry = parse(data)
        assert isinstance(entry, Invalid)
        assert entry.error.code == errors.INVALID_PARAMS


def test_nesting_past_what_orjson_reads_stays_a_parse_error() -> None:
    refused = parse(
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + b"[" * 1100 + b"]" * 1100 + b"}"
    )
    assert isinstance(refused, Invalid)
    assert refused.error.code == errors.PARSE_ERROR


def test_what_nests_too_deep_decides_the_code() -> None:
    deep = nested(DEFAULT_MAX_DEPTH)
    # Outside params (an unknown member): the message itself is refused.
    other = parse(
        orjson.dumps({"jsonrpc": "2.0", "id": 4, "method": "m", "params": {}, "_x": deep})
    )
    assert isinstance(other, Invalid)
    assert (other.id, other.error.code) == (4, errors.INVALID_REQUEST)
    # A notification has no id to answer with.
    note = parse(orjson.dumps({"jsonrpc": "2.0", "method": "m", "params": deep}))
    assert isinstance(note, Invalid)
    assert (note.id, note.error.code) == (None, errors.INVALID_PARAMS)
    # An answer ends the request it answers, as an error: nobody waits for ever.
    for member in ("result", "error"):
        answer = parse(orjson.dumps({"jsonrpc": "2.0", "id": 9, member: deep}))
        assert isinstance(answer, ErrorResponse)
        assert (answer.id, answer.error.code) == (9, errors.INVALID_REQUEST)
        assert "response" in answer.error.data
    # No usable id: nothing to tie the refusal to.
    for message in ({"jsonrpc": "2.0", "id": [1], "result": deep}, {"deep": deep}):
        entry = parse(orjson.dumps(message))
        assert isinstance(entry, Invalid)
        assert (entry.id, entry.error.code) == (None, errors.INVALID_REQUEST)


def test_the_limit_is_a_parameter() -> None:
    data = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "params": nested(8)})
    assert isinstance(parse(data, max_depth=9), Request)
    assert isinstance(parse(data, max_depth=8), Invalid)
    assert isinstance(parse(data, max_depth=200), Request)


def test_many_brackets_but_shallow_is_fine() -> None:
    wide = {"jsonrpc": "2.0", "method": "m", "params": {"items": [{"k": [i]} for i in range(500)]}}
    entry = parse(orjson.dumps(wide))
    assert isinstance(entry, Notification)
    strings = {"jsonrpc": "2.0", "method": "m", "params": {"text": "{[" * 500}}
    assert isinstance(parse(orjson.dumps(strings)), Notification)


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.text(alphabet='{}[]"\\ab', max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=40,
)


@given(json_values, st.integers(min_value=0, max_value=12))
def test_depth_exceeds_agrees_with_the_recursive_definition(value: Any, limit: int) -> None:
    assert depth_exceeds(value, limit) == (depth(value) > limit)


@given(json_values, st.integers(min_value=1, max_value=12))
def test_parse_refuses_exactly_the_messages_deeper_than_the_limit(params: Any, limit: int) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": [params]}
    entry = parse(orjson.dumps(message), max_depth=limit)
    if depth(message) > limit:
        assert isinstance(entry, Invalid)
        assert (entry.id, entry.error.code) == (1, errors.INVALID_PARAMS)
    else:
        assert entry == Request(1, "m", [params])


def batch(size: int) -> bytes:
    return orjson.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "session/list"} for i in range(size)]
    )


def test_a_batch_at_the_bound_passes_and_a_larger_one_is_refused_whole() -> None:
    full = parse(batch(DEFAULT_MAX_BATCH), allow_batch=True)
    assert isinstance(full, Batch)
    assert len(full.entries) == DEFAULT_MAX_BATCH
    refused = parse(batch(DEFAULT_MAX_BATCH + 1), allow_batch=True)
    assert isinstance(refused, Invalid)
    assert (refused.id, refused.error.code) == (None, errors.INVALID_REQUEST)
    assert f"at most {DEFAULT_MAX_BATCH} entries" in refused.error.data
    assert isinstance(parse(batch(5), allow_batch=True, max_batch=4), Invalid)
    assert isinstance(parse(batch(500), allow_batch=True, max_batch=500), Batch)


def test_one_entry_too_deep_does_not_spoil_the_batch() -> None:
    entries = [
        {"jsonrpc": "2.0", "id": 1, "method": "m", "params": nested(DEFAULT_MAX_DEPTH)},
        {"jsonrpc": "2.0", "id": 2, "method": "m", "params": nested(DEFAULT_MAX_DEPTH - 1)},
        {"jsonrpc": "2.0", "id": 3, "result": {"ok": True}},
    ]
    parsed = parse(orjson.dumps(entries), allow_batch=True)
    assert isinstance(parsed, Batch)
    first, second, third = parsed.entries
    assert isinstance(first, Invalid)
    assert (first.id, first.error.code) == (1, errors.INVALID_PARAMS)
    assert isinstance(second, Request)
    assert third == Response(3, {"ok": True})
