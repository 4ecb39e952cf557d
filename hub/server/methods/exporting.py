"""``_hub/export``: a session's export (``hub.store.export``) over the wire, in pages.

Theory of operation
-------------------
A session of 100,000 events must not become one giant frame, so the export comes in pages of
about ``replay_page_bytes`` each: ``{sessionId, format, cursor?}`` -> ``{format, data,
nextCursor}``, ``nextCursor`` being ``null`` on the last page; the client asks again with it
until then and joins the pages' ``data``.

JSONL pages are cut from the session's log: the cursor names the last seq sent, so a page costs
what it sends, and a page asked for later continues where the previous ended even while the
session goes on (the export then covers the events up to the last page). A log that no longer
holds the session's first events exports the compacted state instead (``complete: false``).

A Markdown transcript is rendered whole from the folded state on the first page and kept, one
per connection, until its last page is sent or another export starts; its cursor names that
rendering and a byte offset into its UTF-8 text (a page is cut between two characters, so that
it never exceeds the bound in bytes). Any caller who may see a session (a viewer and above) may
export it: the export shows what replay shows.

``_hub/import {data}`` takes a JSONL export back as a new, read-only session
(``hub.sessions.archive``), for owners of the whole hub only (the ``owner`` role with a
credential for every session: not a share link, not a token scoped to some sessions): an
archive is a session anyone the hub admits might then see listed.
"""

from __future__ import annotations

import secrets
import weakref
from typing import Any

import orjson

from hub.protocol.compact import compact
from hub.protocol.errors import FORBIDDEN, hub_error, invalid_params
from hub.server.methods.caller import Caller
from hub.sessions.errors import SessionFailure
from hub.sessions.ops import SessionOps as Session
from hub.store.export import FORMATS, ExportError, header, jsonl_lines, markdown, read_jsonl

_rendered: weakref.WeakKeyDictionary[Caller, tuple[str, bytes]] = weakref.WeakKeyDictionary()
"""The Markdown export each connection is paging through: (its cursor token, its UTF-8
text; pages and cursors count bytes, cut between characters)."""


def session_header(session: Session, *, complete: bool) -> dict[str, Any]:
    """The export header of ``session``."""
    return header(
        session_id=session.id,
        agent=session.agent_name,
        cwd=session.cwd,
        created_at=session.created_at,
        epoch=session.log.epoch,
        last_seq=session.log.last_seq,
        complete=complete,
        title=session.state.title,
    )


def _update_of(frame: bytes) -> dict[str, Any]:
    update: dict[str, Any] = orjson.loads(frame)["params"]["update"]
    return update


def _jsonl_page(session: Session, cursor: Any, limit: int) -> dict[str, Any]:
    log = session.log
    if cursor is None:
        complete = log.first_retained <= 1
        page = [next(jsonl_lines(session_header(session, complete=complete), ()))]
        if not complete:
            # The whole state, not its history: it folds the same (hub.store.export).
            page += list(jsonl_lines({}, ((0, u) for u in compact(session.state))))[1:]
            return {"data": b"".join(page).decode(), "nextCursor": f"j:{log.last_seq}"}
        after = 0
    else:
        if not isinstance(cursor, str) or not cursor.startswith("j:"):
            raise SessionFailure(invalid_params("cursor is not one of this export's"))
        try:
            after = int(cursor[2:])
        except ValueError:
            raise SessionFailure(invalid_params("cursor is not one of this export's")) from None
        page = []
        if not log.covers(after):
            raise SessionFailure(
                invalid_params("the log no longer holds the events after this cursor; start over")
            )
    size = sum(len(line) for line in page)
    last = after
    for row in log.rows_after(after):
        line = orjson.dumps({"seq": row[0], "update": _update_of(row[2])}) + b"\n"
        if page and size + len(line) > limit:
            return {"data": b"".join(page).decode(), "nextCursor": f"j:{last}"}
        page.append(line)
        size += len(line)
        last = row[0]
    return {"data": b"".join(page).decode(), "nextCursor": None}


def _md_page(conn: Caller, session: Session, cursor: Any, limit: int) -> dict[str, Any]:
    if cursor is None:
        text = markdown(session_header(session, complete=True), session.state).encode()
        token = secrets.token_hex(8)
        _rendered[conn] = (token, text)
        offset = 0
    else:
        held = _rendered.get(conn)
        parts = cursor.split(":") if isinstance(cursor, str) else []
        if held is None or len(parts) != 3 or parts[0] != "m" or parts[1] != held[0]:
            raise SessionFailure(invalid_params("cursor is not one of this export's"))
        token, text = held
        try:
            offset = int(parts[2])
        except ValueError:
            raise SessionFailure(invalid_params("cursor is not one of this export's")) from None
    if not 0 <= offset < len(text) or text[offset] & 0xC0 == 0x80:
        raise SessionFailure(invalid_params("cursor is not one of this export's"))
    end = offset + limit
    if end >= len(text):
        _rendered.pop(conn, None)
        return {"data": text[offset:].decode(), "nextCursor": None}
    while text[end] & 0xC0 == 0x80:  # a UTF-8 continuation byte: cut before its character
        end -= 1
    return {"data": text[offset:end].decode(), "nextCursor": f"m:{token}:{end}"}


def hub_export(conn: Caller, params: dict[str, Any]) -> dict[str, Any]:
    """``_hub/export {sessionId, format, cursor?}`` -> ``{sessionId, format, data,
    nextCursor}``; see the module docstring."""
    session = conn.registry.get(params.get("sessionId"))
    fmt = params.get("format", "jsonl")
    if fmt not in FORMATS:
        raise SessionFailure(invalid_params(f"format must be one of {', '.join(FORMATS)}"))
    limit = max(4096, conn.settings.replay_page_bytes)
    cursor = params.get("cursor")
    page = (
        _jsonl_page(session, cursor, limit)
        if fmt == "jsonl"
        else _md_page(conn, session, cursor, limit)
    )
    return {"sessionId": session.id, "format": fmt, **page}


async def hub_import(conn: Caller, params: dict[str, Any]) -> dict[str, Any]:
    """``_hub/import {data}`` -> ``{sessionId}``: ``data`` (a JSONL export, as text) as a new
    archived session; see the module docstring."""
    if conn.access.sessions is not None or conn.access.link_id is not None:
        raise SessionFailure(
            hub_error(
                FORBIDDEN,
                "importing is for owners of the whole hub (a credential for every session)",
                {"needed": "owner"},
            )
        )
    data = params.get("data")
    if not isinstance(data, str) or not data:
        raise SessionFailure(invalid_params("data must be the text of a JSONL export"))
    try:
        head, events = read_jsonl(data.splitlines())
    except ExportError as exc:
        raise SessionFailure(invalid_params(f"not an export: {exc}")) from None
    session = await conn.registry.import_archive(
        head, [update for _, update in events], conn.principal
    )
    return {"sessionId": session.id}
