"""Newline-delimited framing: LineDecoder and encode_line."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol.errors import LineTooLong, PeerError
from hub.protocol.framing import DEFAULT_MAX_LINE, LineDecoder, encode_line

Item = bytes | tuple[str, int]


def norm(items: list[bytes | LineTooLong]) -> list[Item]:
    """Lines as-is, errors as ("too long", limit): the length seen depends on chunking."""
    return [("too long", i.limit) if isinstance(i, LineTooLong) else i for i in items]


def feed_all(chunks: list[bytes], max_line: int) -> list[bytes | LineTooLong]:
    """What one decoder yields for ``chunks``, then its close; it never buffers more than a
    line."""
    decoder = LineDecoder(max_line)
    out: list[bytes | LineTooLong] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
        assert decoder.buffered <= max_line
    out += decoder.close()
    assert decoder.buffered == 0
    return out


def decode_chunks(chunks: list[bytes], max_line: int = DEFAULT_MAX_LINE) -> list[Item]:
    return norm(feed_all(chunks, max_line))


def reference(stream: bytes, max_line: int) -> list[Item]:
    """The framing rules written the obvious way, over the whole stream at once."""
    out: list[Item] = []
    for raw in stream.split(b"\n"):
        if len(raw) > max_line:
            out.append(("too long", max_line))
            continue
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if line.strip(b" \t\r\x0b\x0c"):
            out.append(line)
    return out


def test_default_limit_is_32_mib() -> None:
    assert DEFAULT_MAX_LINE == 32 * 1024 * 1024
    assert LineDecoder().max_line == DEFAULT_MAX_LINE


def test_one_line_per_feed() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b'{"a":1}\n') == [b'{"a":1}']
    assert decoder.feed(b'{"b":2}\n') == [b'{"b":2}']
    assert decoder.buffered == 0


def test_many_lines_in_one_feed() -> None:
    assert LineDecoder().feed(b"a\nbb\nccc\n") == [b"a", b"bb", b"ccc"]


def test_partial_reads_are_joined() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b'{"jsonrpc":') == []
    assert decoder.buffered == len(b'{"jsonrpc":')
    assert decoder.feed(b'"2.0"}\n{"x"') == [b'{"jsonrpc":"2.0"}']
    assert decoder.buffered == 4
    assert decoder.feed(b":1}\n") == [b'{"x":1}']
    assert decoder.buffered == 0


def test_byte_at_a_time() -> None:
    stream = b"hello\r\nworld\n"
    decoder = LineDecoder()
    out: list[bytes | LineTooLong] = []
    for i in range(len(stream)):
        out += decoder.feed(stream[i : i + 1])
    assert out == [b"hello", b"world"]


def test_crlf_strips_one_carriage_return_only() -> None:
    assert LineDecoder().feed(b"a\r\nb\r\r\n") == [b"a", b"b\r"]


def test_carriage_return_inside_a_line_is_kept() -> None:
    assert LineDecoder().feed(b"a\rb\n") == [b"a\rb"]


def test_blank_and_whitespace_lines_are_skipped() -> None:
    assert LineDecoder().feed(b"\n\r\n  \n\t\r\nx\n\n") == [b"x"]


def test_empty_feed_returns_nothing() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b"") == []
    assert decoder.close() == []


def test_close_returns_unterminated_last_line() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b"a\nlast") == [b"a"]
    assert decoder.close() == [b"last"]
    assert decoder.buffered == 0


def test_close_strips_cr_and_skips_blank_tail() -> None:
    decoder = LineDecoder()
    decoder.feed(b"x\r")
    assert decoder.close() == [b"x"]
    decoder.feed(b"   ")
    assert decoder.close() == []


def test_decoder_is_reusable_after_close() -> None:
    decoder = LineDecoder(4)
    assert norm(decoder.feed(b"123456")) == [("too long", 4)]
    assert decoder.close() == []
    # A fresh stream after close is not mistaken for the rest of the overlong line.
    assert decoder.feed(b"ok\n") == [b"ok"]


def test_line_exactly_at_the_limit_passes() -> None:
    assert LineDecoder(5).feed(b"12345\n") == [b"12345"]
    decoder = LineDecoder(5)
    assert decoder.feed(b"123") == []
    assert decoder.feed(b"45") == []
    assert decoder.buffered == 5
    assert decoder.feed(b"\n") == [b"12345"]


def test_limit_counts_the_carriage_return() -> None:
    # Counting the \r keeps the verdict independent of where the chunks are cut.
    out = LineDecoder(5).feed(b"12345\r\n")
    assert len(out) == 1
    assert isinstance(out[0], LineTooLong)


def test_overlong_line_in_one_chunk() -> None:
    out = LineDecoder(4).feed(b"ok\n123456789\nnext\n")
    assert out[0] == b"ok"
    err = out[1]
    assert isinstance(err, LineTooLong)
    assert isinstance(err, PeerError)
    assert (err.length, err.limit) == (9, 4)
    assert out[2:] == [b"next"]


def test_overlong_line_across_chunks_yields_exactly_one_error() -> None:
    decoder = LineDecoder(4)
    first = decoder.feed(b"12")
    assert first == []
    second = decoder.feed(b"345")
    assert len(second) == 1
    err = second[0]
    assert isinstance(err, LineTooLong)
    assert err.length == 5
    assert err.limit == 4
    assert decoder.buffered == 0
    assert decoder.feed(b"6789") == []
    assert decoder.feed(b"more") == []
    assert decoder.feed(b"tail\nnext\n") == [b"next"]


def test_overlong_line_ending_on_a_chunk_boundary() -> None:
    decoder = LineDecoder(3)
    assert norm(decoder.feed(b"abcdef")) == [("too long", 3)]
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"abc\n") == [b"abc"]


def test_overlong_unterminated_line_at_eof_is_reported_once() -> None:
    decoder = LineDecoder(3)
    assert norm(decoder.feed(b"abcdef")) == [("too long", 3)]
    assert decoder.close() == []


def test_huge_line_is_not_buffered() -> None:
    """A 100 MB line in 64 KiB chunks keeps at most max_line bytes."""
    limit = 1024 * 1024
    chunk = b"x" * (64 * 1024)
    decoder = LineDecoder(limit)
    errors: list[bytes | LineTooLong] = []
    for _ in range((100 * 1024 * 1024) // len(chunk)):
        errors += decoder.feed(chunk)
        assert decoder.buffered <= limit
    assert len(errors) == 1
    assert isinstance(errors[0], LineTooLong)
    assert errors[0].length == limit + len(chunk)
    assert decoder.buffered == 0
    assert decoder.feed(b"x\n{}\n") == [b"{}"]


def test_large_line_in_64k_chunks_is_reassembled() -> None:
    payload = bytes(range(256)).replace(b"\n", b"-") * (4 * 4096)  # 4 MiB
    stream = payload + b"\n"
    decoder = LineDecoder()
    out: list[bytes | LineTooLong] = []
    for i in range(0, len(stream), 65536):
        out += decoder.feed(stream[i : i + 65536])
    assert out == [payload]


def test_feed_accepts_bytearray_and_returns_bytes() -> None:
    out = LineDecoder().feed(bytearray(b"ab\n"))
    assert out == [b"ab"]
    assert type(out[0]) is bytes


def test_invalid_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive"):
        LineDecoder(0)


def test_encode_line_appends_newline() -> None:
    assert encode_line(b'{"a":1}') == b'{"a":1}\n'
    assert LineDecoder().feed(encode_line(b"x")) == [b"x"]


def test_encode_line_rejects_embedded_newline() -> None:
    with pytest.raises(ValueError, match="newline"):
        encode_line(b"a\nb")


# -- properties ------------------------------------------------------------------------

line_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))
streams = st.lists(
    st.one_of(line_bytes, st.sampled_from([b"", b"\r", b" ", b"\t\r"])), max_size=20
).map(lambda lines: b"\n".join(lines))


@st.composite
def chunked(draw: st.DrawFn, stream: bytes) -> list[bytes]:
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


@given(data=st.data(), stream=streams, max_line=st.integers(1, 48))
def test_any_chunking_gives_the_same_lines(
    data: st.DataObject, stream: bytes, max_line: int
) -> None:
    chunks = data.draw(chunked(stream))
    assert b"".join(chunks) == stream
    assert decode_chunks(chunks, max_line) == decode_chunks([stream], max_line)
    assert decode_chunks(chunks, max_line) == reference(stream, max_line)


@given(data=st.data(), stream=st.binary(max_size=300), max_line=st.integers(1, 64))
def test_fuzz_random_bytes_only_yield_lines_or_named_errors(
    data: st.DataObject, stream: bytes, max_line: int
) -> None:
    out = feed_all(data.draw(chunked(stream)), max_line)
    for item in out:
        if isinstance(item, LineTooLong):
            assert item.limit == max_line
            assert item.length > max_line
        else:
            assert type(item) is bytes
            assert b"\n" not in item
            assert 0 < len(item) <= max_line
            assert not item.isspace()
    assert norm(out) == reference(stream, max_line)


@given(st.lists(line_bytes.filter(lambda b: bool(b.strip(b" \t\r\x0b\x0c"))), max_size=10))
def test_encode_then_decode_round_trip(lines: list[bytes]) -> None:
    # A payload ending in \r would lose it on decode; orjson never emits one.
    lines = [line.rstrip(b"\r") for line in lines]
    lines = [line for line in lines if line and not line.isspace()]
    stream = b"".join(encode_line(line) for line in lines)
    assert decode_chunks([stream]) == lines


def test_a_line_of_the_maximum_length_arrives_whole() -> None:
    """A 32 MiB line in 4 KiB chunks is delivered in one piece (its speed is measured by
    the benchmarks, not here)."""
    chunk = b"y" * 4096
    decoder = LineDecoder()
    for _ in range(DEFAULT_MAX_LINE // len(chunk)):
        assert decoder.feed(chunk) == []
    out = decoder.feed(b"\n")
    assert len(out) == 1
    assert isinstance(out[0], bytes)
    assert len(out[0]) == DEFAULT_MAX_LINE
