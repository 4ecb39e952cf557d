"""Export: a session as a JSON-lines event log or as a Markdown transcript.

Theory of operation
-------------------
Both formats are built from what every store holds of a session: the caller (``_hub/export``
on the wire, from the session's log; ``from_store`` for ``acp-hub export``, through the
``Store`` protocol) hands in a header and the session's events, in order, as ``(seq, update)``
pairs of v2 update objects.

JSONL is the log itself: a header line (``{"acpHubExport": 1, "hub": {"version"}, "session":
{...}}``) and then one line per event, ``{"seq": N, "update": {...}}``, the update as every v2
client receives it. Folding the updates in order rebuilds the session's state (an import does
exactly that). When the log no longer holds a session's first events (it keeps a bounded tail,
``retained_events``), the header says ``"complete": false`` and the lines are the compaction of
the current state instead (``seq`` 0 each): the whole state, without its history.

Markdown is for people: the compaction of the folded state (``hub.protocol.compact``, the
timeline in first-appearance order, each message and tool call whole) rendered as a transcript:
who prompted, what the agent answered, each tool call with its diffs and terminal output and the
permission decisions about it (who decided, or which rule), the plans. Times: the session's
creation and the export's, when each prompt was sent (its ``_hub_prompt`` record's ``at``) and
when each permission request was decided (its ``_hub_permission`` record's ``decidedAt``). The
log keeps no clock per event and an agent's updates carry none, so what the agent said and did
has no time of its own: it follows the prompt of its turn.
"""

from __future__ import annotations

import base64
import difflib
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from hub import __version__
from hub.protocol.compact import compact
from hub.protocol.state import SessionState
from hub.store.base import Store
from hub.store.codec import update_of

EXPORT_VERSION: Final = 1
FORMATS: Final = ("jsonl", "md")
MAX_TERMINAL_CHARS: Final = 20_000
"""Characters of one terminal's output a Markdown transcript shows (its end)."""


def header(
    *,
    session_id: str,
    agent: str,
    cwd: str,
    created_at: str,
    epoch: int,
    last_seq: int,
    complete: bool,
    title: str | None = None,
) -> dict[str, Any]:
    """The first line of a JSONL export (and the facts a Markdown export opens with)."""
    return {
        "acpHubExport": EXPORT_VERSION,
        "hub": {"version": __version__},
        "exportedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "session": {
            "id": session_id,
            "agent": agent,
            "cwd": cwd,
            "createdAt": created_at,
            "title": title,
            "epoch": epoch,
            "lastSeq": last_seq,
        },
        "complete": complete,
    }


def jsonl_lines(
    head: dict[str, Any], events: Iterable[tuple[int, dict[str, Any]]]
) -> Iterator[bytes]:
    """The JSONL export: ``head``, then one ``{"seq", "update"}`` line per event."""
    yield orjson.dumps(head) + b"\n"
    for seq, update in events:
        yield orjson.dumps({"seq": seq, "update": update}) + b"\n"


class ExportError(ValueError):
    """A JSONL export that cannot be read back (the message says which line and why)."""


def read_jsonl(
    lines: Iterable[bytes | str],
) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """A JSONL export read back: its header and its events, checked to fold."""
    head: dict[str, Any] | None = None
    events: list[tuple[int, dict[str, Any]]] = []
    state = SessionState()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ExportError(f"line {number}: not JSON: {exc}") from None
        if head is None:
            if not isinstance(value, dict) or value.get("acpHubExport") != EXPORT_VERSION:
                raise ExportError(f"line {number}: not an acp-hub export header")
            session = value.get("session")
            if not isinstance(session, dict) or not isinstance(session.get("id"), str):
                raise ExportError(f"line {number}: the header names no session")
            head = value
            continue
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("seq"), int)
            or not isinstance(value.get("update"), dict)
        ):
            raise ExportError(f"line {number}: an event must be {{seq, update}}")
        try:
            state.apply(value["update"])
        except Exception as exc:  # the fold's checks say what is wrong with it
            raise ExportError(f"line {number}: {exc}") from None
        events.append((value["seq"], value["update"]))
    if head is None:
        raise ExportError("empty export")
    return head, events


# -- Markdown ------------------------------------------------------------------------------


def _text(blocks: Any) -> str:
    """The text of content blocks (other blocks named in brackets)."""
    parts = []
    for block in blocks if isinstance(blocks, list) else [blocks]:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind in ("resource_link", "resource"):
            resource = block.get("resource") if kind == "resource" else block
            uri = resource.get("uri") if isinstance(resource, dict) else None
            parts.append(f"[{kind}: {uri}]")
        elif isinstance(kind, str):
            parts.append(f"[{kind}]")
    return "".join(parts)


_ESCAPES: Final = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _plain(output: str) -> str:
    """Terminal output as plain text: escape sequences and controls removed, each line as a
    carriage return left it (what follows the last one)."""
    text = _ESCAPES.sub("", output).replace("\r\n", "\n")
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return _CONTROLS.sub("", "\n".join(lines))


def _fence(body: str, lang: str = "") -> str:
    """``body`` in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in body.split("\n") if set(run) == {"`"}), default=0)
    ticks = "`" * max(3, longest + 1)
    run = 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        if run >= len(ticks):
            ticks = "`" * (run + 1)
    return f"{ticks}{lang}\n{body.rstrip(chr(10))}\n{ticks}"


def _diff(item: dict[str, Any]) -> str:
    """A diff item as a ``diff`` block: v2's patch text (or its list of changes), v1's
    ``oldText`` / ``newText`` as a unified diff."""
    patch = item.get("patch")
    if isinstance(patch, dict) and isinstance(patch.get("text"), str):
        return _fence(patch["text"], "diff")
    changes = item.get("changes")
    if isinstance(changes, list):
        listed = [
            f"{c.get('operation', 'change')} {c.get('path', '')}"
            for c in changes
            if isinstance(c, dict)
        ]
        return _fence("\n".join(listed))
    path = str(item.get("path", ""))
    old = item.get("oldText")
    new = item.get("newText")
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        (new if isinstance(new, str) else "").splitlines(keepends=True),
        fromfile=f"a/{path}" if old is not None else "/dev/null",
        tofile=f"b/{path}",
    )
    return _fence("".join(line if line.endswith("\n") else line + "\n" for line in lines), "diff")


def _at(record: dict[str, Any], key: str) -> str:
    """`` at TIME`` for a record's time field ``key``, or nothing (older logs have none)."""
    value = record.get(key)
    return f" at {value}" if isinstance(value, str) and value else ""


def _who(by: Any) -> str:
    if not isinstance(by, dict):
        return "the hub"
    if "rule" in by:
        return f"rule {by['rule']} (added by {by.get('createdBy') or 'config'})"
    name = by.get("name") or by.get("principal") or "someone"
    role = by.get("role")
    return f"{name} ({role})" if role else str(name)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _decision(record: dict[str, Any]) -> str:
    """One line saying how a permission request ended and who decided it."""
    status = record.get("status")
    request = _dict(record.get("request"))
    title = request.get("title") or "a permission"
    outcome = _dict(record.get("outcome"))
    if status == "pending":
        return f"- Permission **{title}**: waiting"
    if outcome.get("outcome") == "selected":
        chosen = outcome.get("optionId")
        options = request.get("options")
        for option in options if isinstance(options, list) else []:
            if isinstance(option, dict) and option.get("optionId") == chosen:
                chosen = option.get("name") or chosen
                break
        by = _who(record.get("resolvedBy"))
        return f"- Permission **{title}**: {chosen} — by {by}{_at(record, 'decidedAt')}"
    return f"- Permission **{title}**: {status or 'cancelled'}{_at(record, 'decidedAt')}"


def _tool_call_of(record: dict[str, Any]) -> str | None:
    request = record.get("request")
    if not isinstance(request, dict):
        return None
    subject = request.get("subject")
    tool = subject.get("toolCall") if isinstance(subject, dict) else request.get("toolCall")
    tool_id = tool.get("toolCallId") if isinstance(tool, dict) else None
    return tool_id if isinstance(tool_id, str) else None


def markdown(head: dict[str, Any], state: SessionState) -> str:
    """The Markdown transcript of ``state`` (the session's folded state)."""
    updates = compact(state)
    session = head.get("session", {})
    terminals: dict[str, str] = {}
    permissions: dict[str, list[dict[str, Any]]] = {}
    loose: list[dict[str, Any]] = []
    prompts: dict[str, dict[str, Any]] = {}
    for update in updates:
        variant = update.get("sessionUpdate")
        if variant == "terminal_update":
            output = update.get("output")
            data = output.get("data") if isinstance(output, dict) else None
            raw = base64.b64decode(data) if isinstance(data, str) else b""
            terminals[str(update.get("terminalId"))] = _plain(raw.decode("utf-8", "replace"))
        elif variant == "_hub_permission":
            tool_id = _tool_call_of(update)
            if tool_id is None:
                loose.append(update)
            else:
                permissions.setdefault(tool_id, []).append(update)
        elif variant == "_hub_prompt":
            prompts[str(update.get("messageId"))] = update
    title = session.get("title") or session.get("id")
    out = [
        f"# {title}",
        "",
        f"- Session: `{session.get('id')}`",
        f"- Agent: {session.get('agent')}",
        f"- Working directory: `{session.get('cwd')}`",
        f"- Created: {session.get('createdAt')}",
        f"- Exported: {head.get('exportedAt')} (acp-hub {head.get('hub', {}).get('version')})",
    ]
    if not head.get("complete", True):
        out.append("- The hub no longer held the session's first events: this starts later.")
    for update in updates:
        variant = update.get("sessionUpdate")
        if variant in ("user_message", "agent_message", "agent_thought"):
            text = _text(update.get("content"))
            if variant == "user_message":
                who = prompts.get(str(update.get("messageId")))
                by = f" — {_who(who)}{_at(who, 'at')}" if who is not None else ""
                out += ["", f"## Prompt{by}", "", text]
            elif variant == "agent_thought":
                out += ["", "> " + text.replace("\n", "\n> ")]
            else:
                out += ["", "## Agent", "", text]
        elif variant == "tool_call_update":
            tool_id = str(update.get("toolCallId"))
            kind = update.get("kind") or "other"
            status = update.get("status") or "pending"
            out += ["", f"### Tool call: {update.get('title') or tool_id} ({kind}, {status})"]
            for item in update.get("content") or []:
                if not isinstance(item, dict):
                    continue
                if item.get("type") == "diff":
                    out += ["", _diff(item)]
                elif item.get("type") == "terminal":
                    text = terminals.get(str(item.get("terminalId")), "")
                    if len(text) > MAX_TERMINAL_CHARS:
                        text = "…" + text[-MAX_TERMINAL_CHARS:]
                    out += ["", _fence(text, "console")]
                elif item.get("type") == "content":
                    out += ["", _text(item.get("content"))]
            decisions = [_decision(r) for r in permissions.get(tool_id, [])]
            if decisions:
                out += ["", *decisions]
        elif variant == "plan_update":
            plan = _dict(update.get("plan"))
            out += ["", "### Plan", ""]
            for entry in plan.get("entries") or update.get("entries") or []:
                if isinstance(entry, dict):
                    done = "x" if entry.get("status") == "completed" else " "
                    out.append(f"- [{done}] {entry.get('content', '')}")
    if loose:
        out += ["", "## Other permission requests", "", *[_decision(r) for r in loose]]
    return "\n".join(out).rstrip("\n") + "\n"


# -- from a store --------------------------------------------------------------------------


async def from_store(store: Store, session_id: str, fmt: str) -> bytes:
    """The export of ``session_id`` as ``store`` holds it (``acp-hub export``), read without
    changing anything there: the directory record, then the whole stored log when the store
    still has it, else the latest snapshot and the events after it (``complete: false``).
    ``ExportError`` when the store does not know the session."""
    record = next((r for r in await store.records() if r.session_id == session_id), None)
    if record is None:
        raise ExportError(f"the store holds no session {session_id!r}")
    rows = await store.read_after(session_id, 0)
    events: list[tuple[int, dict[str, Any]]] = []
    epoch = 0
    complete = rows is not None and (not rows or rows[0][0] == 1)
    if rows is None:
        snapshot = await store.latest_snapshot(session_id)
        if snapshot is None:
            raise ExportError(f"the store holds no log of {session_id!r}")
        epoch = snapshot.epoch
        events = [(0, u) for u in snapshot.updates]
        rows = await store.read_after(session_id, snapshot.seq) or []
    events += [(row[0], update_of(row)) for row in rows]
    state = SessionState().apply_all(u for _, u in events)
    head = header(
        session_id=session_id,
        agent=record.agent,
        cwd=record.cwd,
        created_at=record.created_at,
        epoch=epoch,
        last_seq=events[-1][0] if events else 0,
        complete=complete,
        title=state.title,
    )
    if fmt == "md":
        return markdown(head, state).encode()
    return b"".join(jsonl_lines(head, events))
