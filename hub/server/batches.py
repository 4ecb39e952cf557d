"""A JSON-RPC batch from a client (v2 only): its entries are dispatched one by one, and their
answers go back as one frame once the last is in (none when it held no request)."""

from __future__ import annotations

from collections.abc import Callable

from hub.protocol import jsonrpc

__all__ = ["dispatch_batch"]

Reply = Callable[[bytes], None]


def dispatch_batch(
    batch: jsonrpc.Batch,
    dispatch: Callable[[jsonrpc.Message, Reply], None],
    push: Reply,
) -> None:
    """Give every entry of ``batch`` to ``dispatch`` with a reply that collects its answer;
    ``push`` the batch's answer when every request (and invalid entry) has one."""
    replies: list[jsonrpc.Response | jsonrpc.ErrorResponse | jsonrpc.Invalid] = []
    waiting = [sum(1 for e in batch.entries if isinstance(e, jsonrpc.Request | jsonrpc.Invalid))]

    def collect(frame: bytes) -> None:
        entry = jsonrpc.parse(frame)
        if isinstance(entry, jsonrpc.Response | jsonrpc.ErrorResponse | jsonrpc.Invalid):
            replies.append(entry)
        waiting[0] -= 1
        if waiting[0] == 0:
            out = jsonrpc.batch_reply(replies)
            if out is not None:
                push(out)

    for entry in batch.entries:
        if isinstance(entry, jsonrpc.Invalid):
            collect(jsonrpc.encode(entry))
        else:
            dispatch(entry, collect)
