"""What the clients of several hub nodes wait for and check: the updates of a variant, turns
ended, a contiguous run of seqs, the state folded up to a seq, a full-replay watch."""

from __future__ import annotations

from typing import Any

from hub.protocol.state import SessionState
from tests.server.harness import AcpClient


def seqs_contiguous(client: AcpClient, session_id: str) -> list[int]:
    seqs = client.seqs(session_id)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
    return seqs


def updates_of(client: AcpClient, session_id: str, variant: str) -> list[dict[str, Any]]:
    return [
        p["update"]
        for p in client.session_updates(session_id)
        if p["update"].get("sessionUpdate") == variant
    ]


async def turns_ended(client: AcpClient, session_id: str, count: int) -> None:
    await client.wait_for(lambda: client.idle_count(session_id) >= count)


def fold_upto(client: AcpClient, session_id: str, seq: int) -> dict[str, Any]:
    """The state ``client`` folded from what it got up to event ``seq`` (replay included)."""
    state = SessionState()
    for params in client.session_updates(session_id):
        if params.get("_meta", {}).get("acp-hub", {}).get("seq", 0) <= seq:
            state.apply(params["update"])
    return state.snapshot()


async def seen_up_to(client: AcpClient, session_id: str, seq: int) -> None:
    await client.wait_for(lambda: client.last_seq(session_id) >= seq)


async def chunks_seen(client: AcpClient, session_id: str, count: int) -> None:
    await client.wait_for(
        lambda: len(updates_of(client, session_id, "agent_message_chunk")) >= count
    )


async def agent_status(client: AcpClient, session_id: str, status: str, within: float) -> None:
    await client.wait_for(
        lambda: any(
            u.get("status") == status for u in updates_of(client, session_id, "_hub_agent")
        ),
        timeout=within,
    )


async def idle(client: AcpClient, session_id: str) -> None:
    await client.wait_for(lambda: client.fold(session_id).foreground == "idle")


async def watch(client: AcpClient, session_id: str) -> int:
    """Attach ``client`` with a full replay; the seq its state covers."""
    result = await client.call(
        "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": {"type": "start"}}
    )
    return int(result["_meta"]["acp-hub"]["seq"])
