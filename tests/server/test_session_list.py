"""``session/list`` in pages over real sockets (docs/protocol.md, docs/limits.md): a page of at
most ``list_page_size`` sessions ordered by id, ``nextCursor`` while more follow, pages that
hold while sessions come and go, and malformed cursors refused with ``-32602``.

A small ``list_page_size`` stands in for hundreds of sessions (a real agent per session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from hub.server.listing import cursor_after
from hub.settings import Settings
from tests.server.harness import AcpClient, RpcFailure, acp_client, running_hub, scripted_agent

INVALID_PARAMS = -32602


async def every_page(client: AcpClient, params: dict[str, Any]) -> list[list[str]]:
    """The session ids of each page, following ``nextCursor`` to the end."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        listed = await client.call(
            "session/list", {**params, **({"cursor": cursor} if cursor else {})}
        )
        pages.append([s["sessionId"] for s in listed["sessions"]])
        cursor = listed.get("nextCursor")
        if cursor is None:
            return pages
        assert isinstance(cursor, str)
        assert len(pages) < 20, "nextCursor never ends"


async def test_session_list_is_paged_in_id_order(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    async with (
        running_hub([scripted_agent()], Settings(list_page_size=3)) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, 1) as v1,
    ):
        made = [await owner.new_session() for _ in range(7)]
        elsewhere = [await owner.new_session(cwd=str(other)) for _ in range(2)]
        pages = await every_page(owner, {})
        assert [len(p) for p in pages] == [3, 3, 3]
        listed = [s for page in pages for s in page]
        assert listed == sorted(made + elsewhere)
        # A v1 client pages alike (the v1 schema has the same cursor and nextCursor).
        assert await every_page(v1, {}) == pages
        # The cwd filter applies before paging: full pages of that directory only.
        assert await every_page(owner, {"cwd": "/tmp"}) == [sorted(made)[:3], sorted(made)[3:6],
                                                            sorted(made)[6:]]  # fmt: skip
        assert await every_page(owner, {"cwd": str(other)}) == [sorted(elsewhere)]
        assert await every_page(owner, {"cwd": "/nowhere"}) == [[]]
        # A batch of lists is a batch of pages, not of every session.
        await owner.send(
            [{"jsonrpc": "2.0", "id": 900 + i, "method": "session/list"} for i in range(32)]
        )
        await owner.wait_for(lambda: any(isinstance(f, list) for f in owner.frames))
        batch = next(f for f in owner.frames if isinstance(f, list))
        assert len(batch) == 32
        assert all(len(reply["result"]["sessions"]) == 3 for reply in batch)
        assert all(reply["result"]["nextCursor"] == batch[0]["result"]["nextCursor"]
                   for reply in batch)  # fmt: skip


async def test_pages_hold_while_sessions_come_and_go() -> None:
    async with (
        running_hub([scripted_agent()], Settings(list_page_size=2)) as hub,
        acp_client(hub.url) as owner,
    ):
        made = sorted([await owner.new_session() for _ in range(5)])
        first = await owner.call("session/list", {})
        assert [s["sessionId"] for s in first["sessions"]] == made[:2]
        # The last session of the page goes, new ones come: the cursor still holds its place.
        await owner.call("session/close", {"sessionId": made[1]})
        late = [await owner.new_session() for _ in range(3)]
        rest: list[str] = []
        cursor = first["nextCursor"]
        while cursor is not None:
            listed = await owner.call("session/list", {"cursor": cursor})
            rest += [s["sessionId"] for s in listed["sessions"]]
            cursor = listed.get("nextCursor")
        # Every session that existed throughout is listed once; the new ones where their id
        # falls (after the cursor: listed; before it: on the next listing from the start).
        assert rest == sorted(s for s in made[2:] + late if s > made[1])
        assert len(set(rest)) == len(rest)


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "garbage",
        "c1.",
        "c1.!!!!",
        "c1.A",
        "c1.//8",
        "c1." + "QQ" * 1000,
        "c1.\x00",
        123,
        1.5,
        True,
        ["c1.cy0x"],
        {"after": "s-1"},
    ],
)
async def test_a_malformed_cursor_is_refused(cursor: Any) -> None:
    async with (
        running_hub([scripted_agent()], Settings(list_page_size=1)) as hub,
        acp_client(hub.url) as owner,
    ):
        await owner.new_session()
        await owner.new_session()
        with pytest.raises(RpcFailure) as caught:
            await owner.call("session/list", {"cursor": cursor})
        assert caught.value.code == INVALID_PARAMS
        assert "cursor" in str(caught.value.error.get("data"))
        # The connection and the hub are fine, and a null cursor is the first page.
        listed = await owner.call("session/list", {"cursor": None})
        assert len(listed["sessions"]) == 1
        assert owner.close_code is None


async def test_a_cursor_naming_a_session_that_never_existed_pages_on_from_its_place() -> None:
    # The cursor carries no authority: a forged one (this hub's format, any id) only skips.
    async with (
        running_hub([scripted_agent()], Settings(list_page_size=10)) as hub,
        acp_client(hub.url) as owner,
    ):
        made = sorted([await owner.new_session() for _ in range(3)])
        listed = await owner.call("session/list", {"cursor": cursor_after(made[0] + "~")})
        assert [s["sessionId"] for s in listed["sessions"]] == made[1:]
        assert "nextCursor" not in listed
        empty = await owner.call("session/list", {"cursor": cursor_after("\U0010ffff")})
        assert empty == {"sessions": []}
        assert len(orjson.dumps(empty)) < 64
