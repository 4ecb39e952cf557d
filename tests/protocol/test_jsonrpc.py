"""JSON-RPC envelopes: classification, batches, encoding and round trips."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol import errors
from hub.protocol.errors import RpcError
from hub.protocol.jsonrpc import (
    Batch,
    Entry,
    ErrorResponse,
    Invalid,
    Message,
    Notification,
    Request,
    Response,
    batch_reply,
    classify,
    encode,
    encode_batch,
    error,
    exact,
    is_request_id,
    needs_reply,
    notification,
    parse,
    request,
    response,
)


def invalid(data: bytes | str, *, allow_batch: bool = False) -> Invalid:
    entry = parse(data, allow_batch=allow_batch)
    assert isinstance(entry, Invalid), entry
    return entry


# -- classification of single messages ---------------------------------------------------


def test_request() -> None:
    assert parse(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"a":1}}') == Request(
        1, "initialize", {"a": 1}
    )


def test_request_with_string_id_and_array_params() -> None:
    assert parse('{"jsonrpc":"2.0","id":"x","method":"m","params":[1,2]}') == Request(
        "x", "m", [1, 2]
    )


def test_request_without_params_has_none() -> None:
    assert parse(b'{"jsonrpc":"2.0","id":7,"method":"m"}') == Request(7, "m", None)


def test_request_with_null_id_is_still_a_request() -> None:
    entry = parse(b'{"jsonrpc":"2.0","id":null,"method":"m"}')
    assert entry == Request(None, "m", None)
    assert needs_reply(entry)


def test_null_params_read_as_absent() -> None:
    assert parse(b'{"jsonrpc":"2.0","method":"m","params":null}') == Notification("m", None)


def test_notification() -> None:
    entry = parse(b'{"jsonrpc":"2.0","method":"session/update","params":{"x":[]}}')
    assert entry == Notification("session/update", {"x": []})
    assert not needs_reply(entry)


def test_response_with_any_result() -> None:
    assert parse(b'{"jsonrpc":"2.0","id":3,"result":{"ok":true}}') == Response(3, {"ok": True})
    assert parse(b'{"jsonrpc":"2.0","id":"a","result":null}') == Response("a", None)
    assert parse(b'{"jsonrpc":"2.0","id":0,"result":[1]}') == Response(0, [1])


def test_error_response() -> None:
    entry = parse(b'{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"no","data":"m"}}')
    assert entry == ErrorResponse(4, RpcError(-32601, "no", "m"))
    assert not needs_reply(entry)


def test_error_response_with_null_id() -> None:
    entry = parse(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
    assert entry == ErrorResponse(None, RpcError(-32700, "Parse error"))


def test_malformed_error_object_is_tolerated() -> None:
    entry = parse(b'{"jsonrpc":"2.0","id":4,"error":"boom"}')
    assert entry == ErrorResponse(
        4, RpcError(errors.INTERNAL_ERROR, "malformed error object", "boom")
    )


def test_unknown_extra_fields_are_tolerated() -> None:
    entry = parse(b'{"jsonrpc":"2.0","id":1,"method":"m","_meta":{"t":1},"extra":true}')
    assert entry == Request(1, "m", None)


def test_whitespace_around_the_message_is_fine() -> None:
    assert parse(b'  {"jsonrpc":"2.0","method":"m"}\r\n') == Notification("m", None)


# -- invalid input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"{", b"not json", b"\xff\xfe", b'{"a":1}x', "\ud800", b"[" * 2000 + b"]" * 2000],
)
def test_unparseable_input_is_parse_error_with_null_id(data: bytes | str) -> None:
    entry = invalid(data)
    assert entry.id is None
    assert entry.error.code == errors.PARSE_ERROR
    assert entry.error.message == "Parse error"
    assert needs_reply(entry)


@pytest.mark.parametrize("data", [b"42", b'"x"', b"null", b"true", b"1.5"])
def test_non_object_json_is_invalid_request(data: bytes) -> None:
    entry = invalid(data)
    assert (entry.id, entry.error.code) == (None, errors.INVALID_REQUEST)


@pytest.mark.parametrize(
    ("obj", "expected_id", "reason"),
    [
        ({"id": 1, "method": "m"}, 1, "jsonrpc"),
        ({"jsonrpc": "1.0", "id": "a", "method": "m"}, "a", "jsonrpc"),
        ({"jsonrpc": 2.0, "method": "m"}, None, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": None}, 1, "method"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": 3}, 1, "params"),
        ({"jsonrpc": "2.0", "method": "m", "params": "s"}, None, "params"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "result": 1}, 1, "result"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "error": {}}, 1, "result"),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, None, "id"),
        ({"jsonrpc": "2.0", "id": [1], "result": 1}, None, "id"),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "m"}, None, "id"),
        ({"jsonrpc": "2.0", "id": 1}, 1, "exactly one"),
        ({"jsonrpc": "2.0", "id": 1, "result": 1, "error": {}}, 1, "exactly one"),
        ({"jsonrpc": "2.0", "result": 1}, None, "id"),
        ({"jsonrpc": "2.0", "error": {"code": 1, "message": "x"}}, None, "id"),
        ({"jsonrpc": "2.0", "id": None, "result": 1}, None, "null id"),
        ({}, None, "jsonrpc"),
    ],
)
def test_invalid_envelopes(obj: dict[str, Any], expected_id: object, reason: str) -> None:
    entry = invalid(orjson.dumps(obj))
    assert entry.id == expected_id
    assert entry.error.code == errors.INVALID_REQUEST
    assert reason in str(entry.error.data)
    assert classify(obj) == entry


def test_broken_answers_name_the_request_they_answer() -> None:
    # No method and a non-null id: a broken answer, which the reader ends as failed.
    answers: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 7},
        {"jsonrpc": "2.0", "id": 7, "result": 1, "error": {"code": 1, "message": "x"}},
        {"id": 7, "result": {}},
    ]
    others: list[dict[str, Any]] = [
        {"jsonrpc": "1.0", "id": 7, "method": "m"},  # a call: answered, not an answer
        {"jsonrpc": "2.0", "result": 1},  # no id: nothing to end
        {"jsonrpc": "2.0", "id": None},
    ]
    for obj in answers:
        entry = classify(obj)
        assert isinstance(entry, Invalid), obj
        assert entry.answers, obj
        assert entry.id == 7
    for obj in others:
        entry = classify(obj)
        assert isinstance(entry, Invalid), obj
        assert not entry.answers, obj


def test_classify_of_non_object() -> None:
    assert classify([1]) == Invalid(
        None, errors.invalid_request("a JSON-RPC message must be an object")
    )


def test_classify_of_a_mapping_that_is_not_a_plain_dict() -> None:
    # Decoded JSON is a plain dict (the fast path); any other dict classifies the same way.
    class Message(dict[str, Any]):
        pass

    notification = Message(jsonrpc="2.0", method="m", params={"a": 1})
    assert classify(notification) == Notification("m", {"a": 1})
    assert classify(Message(jsonrpc="2.0", method="m", params=3)).error.code == (  # type: ignore[union-attr]
        errors.INVALID_REQUEST
    )


def test_notifications_that_the_fast_path_hands_on_to_the_full_checks() -> None:
    bad = [
        ({"jsonrpc": "2.0", "method": "m", "params": "x"}, "params must be an object or an array"),
        ({"jsonrpc": "1.0", "method": "m"}, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "2.0", "method": 1}, "method must be a string"),
        ({"jsonrpc": "2.0", "method": "m", "result": 1}, "a call must not carry result or error"),
    ]
    for obj, reason in bad:
        entry = classify(obj)
        assert isinstance(entry, Invalid), obj
        assert reason in str(entry.error.data)


def test_is_request_id() -> None:
    assert all(is_request_id(v) for v in ["", "a", 0, -1, 2**63 - 1, None])
    assert not any(is_request_id(v) for v in [True, False, 1.0, [], {}, b"x"])


# -- batches (ACP v2 only: https://agentclientprotocol.com/protocol/v2/transports) ------------


def test_array_is_refused_without_allow_batch() -> None:
    entry = invalid(b'[{"jsonrpc":"2.0","method":"m"}]')
    assert entry.id is None
    assert entry.error == errors.invalid_request(
        "batches are only allowed on protocol v2 connections"
    )


def test_empty_batch_is_a_single_invalid_request() -> None:
    assert invalid(b"[]", allow_batch=True) == Invalid(None, errors.invalid_request("empty batch"))
    assert invalid(b" [ ] ").error.code == errors.INVALID_REQUEST


def test_batch_entries_are_classified_independently() -> None:
    data = orjson.dumps(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "a"},
            {"jsonrpc": "2.0", "method": "b", "params": {}},
            1,
            {"jsonrpc": "1.0", "id": "x", "method": "c"},
            {"jsonrpc": "2.0", "id": False, "method": "d"},
            {"jsonrpc": "2.0", "id": 9, "result": "r"},
            [],
        ]
    )
    batch = parse(data, allow_batch=True)
    assert isinstance(batch, Batch)
    e = batch.entries
    assert e[0] == Request(1, "a", None)
    assert e[1] == Notification("b", {})
    assert isinstance(e[2], Invalid)
    assert e[2].id is None
    assert isinstance(e[3], Invalid)
    assert e[3].id == "x"
    assert isinstance(e[4], Invalid)
    assert e[4].id is None
    assert e[5] == Response(9, "r")
    assert isinstance(e[6], Invalid)
    assert [needs_reply(x) for x in e] == [True, False, True, True, True, False, True]


def test_invalid_json_in_batch_mode_is_still_a_single_parse_error() -> None:
    entry = invalid(b'[{"jsonrpc":"2.0"', allow_batch=True)
    assert (entry.id, entry.error.code) == (None, errors.PARSE_ERROR)


def test_batch_reply_of_nothing_is_none() -> None:
    assert batch_reply([]) is None


def test_batch_reply_encodes_an_array_of_answers() -> None:
    replies: list[Response | ErrorResponse | Invalid] = [
        Response(1, {"ok": True}),
        ErrorResponse("a", errors.method_not_found("x")),
        Invalid(None, errors.invalid_request()),
    ]
    out = batch_reply(replies)
    assert out is not None
    assert orjson.loads(out) == [
        {"jsonrpc": "2.0", "id": 1, "result": {"ok": True}},
        {
            "jsonrpc": "2.0",
            "id": "a",
            "error": {"code": -32601, "message": "Method not found", "data": {"method": "x"}},
        },
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid request"}},
    ]


def test_encode_batch_refuses_empty() -> None:
    with pytest.raises(ValueError, match="empty batch"):
        encode_batch([])
    with pytest.raises(ValueError, match="empty batch"):
        encode(Batch(()))


# -- encoding ------------------------------------------------------------------------------


def test_encode_request_omits_absent_params() -> None:
    assert orjson.loads(encode(Request(1, "m", None))) == {"jsonrpc": "2.0", "id": 1, "method": "m"}
    assert orjson.loads(encode(Request("1", "m", []))) == {
        "jsonrpc": "2.0",
        "id": "1",
        "method": "m",
        "params": [],
    }


def test_encode_notification() -> None:
    assert orjson.loads(encode(Notification("n", {"a": 1}))) == {
        "jsonrpc": "2.0",
        "method": "n",
        "params": {"a": 1},
    }
    assert orjson.loads(encode(Notification("n"))) == {"jsonrpc": "2.0", "method": "n"}


def test_encode_response_keeps_null_result() -> None:
    assert orjson.loads(encode(Response(2, None))) == {"jsonrpc": "2.0", "id": 2, "result": None}


def test_encode_invalid_is_an_error_response() -> None:
    out = encode(Invalid(None, errors.parse_error("bad")))
    assert orjson.loads(out) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error", "data": "bad"},
    }


def test_encoded_output_has_no_newline() -> None:
    assert b"\n" not in encode(Notification("m", {"text": "a\nb"}))


def test_helpers_match_encode() -> None:
    assert request(1, "m", {"a": 1}) == encode(Request(1, "m", {"a": 1}))
    assert request(1, "m") == encode(Request(1, "m"))
    assert notification("n", [1]) == encode(Notification("n", [1]))
    assert notification("n") == encode(Notification("n"))
    assert response("r", {"x": 1}) == encode(Response("r", {"x": 1}))
    err = errors.forbidden("prompter", "observer", "session/prompt")
    assert error(5, err) == encode(ErrorResponse(5, err))
    assert parse(error(5, err)) == ErrorResponse(5, err)


def test_encode_batch_round_trip() -> None:
    entries: tuple[Entry, ...] = (Request(1, "a", {}), Notification("b"), Response(2, 3))
    assert parse(encode(Batch(entries)), allow_batch=True) == Batch(entries)


def test_messages_are_frozen() -> None:
    msg = Request(1, "m")
    with pytest.raises(AttributeError):
        msg.method = "x"  # type: ignore[misc]


# -- properties ----------------------------------------------------------------------------

ints = st.integers(-(2**63), 2**63 - 1)
json_scalars = st.none() | st.booleans() | ints | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    json_scalars | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.one_of(st.text(max_size=8), ints)
params = (
    st.none()
    | st.lists(json_values, max_size=3)
    | st.dictionaries(st.text(max_size=8), json_values, max_size=3)
)
methods = st.text(max_size=20)
rpc_errors = st.builds(
    RpcError, ints.filter(lambda c: -(2**31) <= c < 2**31), st.text(max_size=10), json_values
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Request, ids | st.none(), methods, params),
    st.builds(Notification, methods, params),
    st.builds(Response, ids, json_values),
    st.builds(ErrorResponse, ids | st.none(), rpc_errors),
)


@given(messages)
def test_encode_parse_round_trip(msg: Message) -> None:
    assert parse(encode(msg)) == msg
    assert parse(encode(msg).decode()) == msg


@given(st.lists(messages, min_size=1, max_size=5))
def test_batch_round_trip(msgs: list[Message]) -> None:
    assert parse(encode_batch(msgs), allow_batch=True) == Batch(tuple(msgs))


@given(ids | st.none(), rpc_errors)
def test_invalid_encodes_as_the_matching_error_response(
    msg_id: str | int | None, err: RpcError
) -> None:
    assert parse(encode(Invalid(msg_id, err))) == ErrorResponse(msg_id, err)


@given(st.binary(max_size=200), st.booleans())
def test_parse_of_arbitrary_bytes_never_raises(data: bytes, allow_batch: bool) -> None:
    entry = parse(data, allow_batch=allow_batch)
    assert isinstance(entry, Request | Notification | Response | ErrorResponse | Invalid | Batch)


@given(st.text(max_size=200), st.booleans())
def test_parse_of_arbitrary_text_never_raises(data: str, allow_batch: bool) -> None:
    entry = parse(data, allow_batch=allow_batch)
    assert isinstance(entry, Request | Notification | Response | ErrorResponse | Invalid | Batch)


envelope_like = st.dictionaries(
    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
    st.one_of(json_values, st.just("2.0")),
    max_size=6,
)


@given(st.one_of(json_values, envelope_like, st.lists(envelope_like, max_size=4)), st.booleans())
def test_parse_of_arbitrary_json_never_raises_and_invalids_answerable(
    value: Any, allow_batch: bool
) -> None:
    result = parse(orjson.dumps(value), allow_batch=allow_batch)
    entries = result.entries if isinstance(result, Batch) else (result,)
    for entry in entries:
        if isinstance(entry, Invalid):
            assert is_request_id(entry.id)
            assert entry.error.code in (errors.INVALID_REQUEST, errors.PARSE_ERROR)
            # The answer to an invalid entry must itself be a well-formed error response.
            assert parse(encode(entry)) == ErrorResponse(entry.id, entry.error)
        else:
            assert parse(encode(entry)) == entry


# -- a v2 batch answered the way the v2 transports page prescribes ---------------------------


def answer(batch: Batch) -> bytes | None:
    """Echo each request's method back; answer invalid entries; skip notifications."""
    replies: list[Response | ErrorResponse | Invalid] = []
    for entry in batch.entries:
        if isinstance(entry, Request):
            replies.append(Response(entry.id, entry.method))
        elif isinstance(entry, Invalid):
            replies.append(entry)
    return batch_reply(replies)


def test_batch_answers_requests_and_invalid_entries_only() -> None:
    data = b"""[
        {"jsonrpc":"2.0","id":1,"method":"a"},
        {"jsonrpc":"2.0","method":"note"},
        {"foo":"bar"},
        {"jsonrpc":"2.0","id":"z","method":"b","params":[]}
    ]"""
    batch = parse(data, allow_batch=True)
    assert isinstance(batch, Batch)
    out = answer(batch)
    assert out is not None
    reply = orjson.loads(out)
    assert reply[0] == {"jsonrpc": "2.0", "id": 1, "result": "a"}
    assert reply[1]["id"] is None
    assert reply[1]["error"]["code"] == errors.INVALID_REQUEST
    assert reply[2] == {"jsonrpc": "2.0", "id": "z", "result": "b"}
    assert len(reply) == 3


def test_batch_of_only_notifications_gets_no_reply_at_all() -> None:
    batch = parse(
        b'[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"}]', allow_batch=True
    )
    assert isinstance(batch, Batch)
    assert not any(needs_reply(e) for e in batch.entries)
    assert answer(batch) is None


def test_responses_are_exact_size_copies() -> None:
    """A connection may hold its last response a while: it must not keep orjson's output
    buffer (about 4 KiB whatever the length), which ``sys.getsizeof`` does not show."""
    makers: tuple[Callable[[int], bytes], ...] = (
        lambda n: response(n, {"ok": True}),
        lambda n: error(n, errors.invalid_params("nope")),
        lambda n: exact(orjson.dumps({"a": n})),
    )
    for make in makers:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = [make(n) for n in range(1000)]
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        per_frame = grown / len(kept)
        assert per_frame < max(len(f) for f in kept) + 200
