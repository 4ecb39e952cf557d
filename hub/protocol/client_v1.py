"""The v1 client side: the hub's internal v2 update stream, rendered for v1 clients.

Theory of operation
-------------------
A ``ClientV1Renderer`` is made once per session and its output is shared by every v1 client
of that session, so it keeps the per-stream state v1 needs: which tool calls were announced,
accumulated tool-call content and terminal bytes, which messages already had content sent,
the last mode. ``render_replay`` renders a compacted replay for a late joiner with a fresh
renderer.

Deliberate losses towards v1 (v1 cannot say these things; each is asserted in the tests;
see https://agentclientprotocol.com/protocol/v2/migration for what v2 added):

* Tool calls and their content: see ``hub.protocol.tool_calls``.
* Terminals (reference, ``terminal_update``, ``terminal_output_chunk``) become a text block
  in the tool call that references them: ``$ command``, the output decoded as UTF-8 with
  ANSI sequences and control characters removed (``hub.protocol.terminal``), and the exit
  status. The block's ``_meta["acp-hub"].terminalId`` names the terminal; every change
  re-sends the tool call's full content (v1 content replaces). Only the last
  ``max_terminal_bytes`` bytes of each terminal are kept.
* ``plan_update``: only ``items`` plans are rendered, as ``plan`` (the plan id is dropped;
  with several plans the last update wins); entry status ``cancelled`` becomes
  ``completed``, other unknown statuses ``pending``, unknown priorities ``medium``, the
  original in the entry's ``_meta["acp-hub"]``.
* Whole-message upserts (``user_message`` / ``agent_message`` / ``agent_thought``): the
  first content for a message id becomes one chunk per block. Content that replaces what
  was already sent, or a clear, cannot be said in v1: the renderer sends the new content
  as chunks of the same message whose first chunk carries
  ``_meta["acp-hub"].replaces = messageId`` ("this chunk starts the message over"; a clear
  is one empty text chunk with the marker). A client that ignores the marker appends.
  Message-level ``_meta`` patches are not rendered.
* ``state_update`` is dropped (implicit in v1); unknown and ``_`` update variants are
  dropped (the v1 union is closed) except the hub's own ``_hub_*`` variants, which pass
  through unchanged - the session layer sends them only to v1 clients that opted in.
* Content blocks of unknown type become a text placeholder with the original block in
  ``_meta["acp-hub"].block`` (``hub.protocol.content``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from hub.protocol.checks import check
from hub.protocol.config_options import config_options_v2_to_v1, mode_option
from hub.protocol.content import block_v2_to_v1, text
from hub.protocol.shapes import (  # Structural: the shape checks used here, one by one.
    copy_meta,
    decode_base64,
    optional_str,
    require_list,
    require_object,
    require_objects,
    require_str,
    with_hub_meta,
)
from hub.protocol.terminal import sanitize_terminal
from hub.protocol.tool_calls import TOOL_TITLE, tool_fields_v2_to_v1, tool_item_v2_to_v1
from hub.protocol.variants import (
    CHUNK_OF_MESSAGE,
    CHUNKS,
    SAME_IN_BOTH,
    V1_PLAN_PRIORITIES,
    V1_PLAN_STATUSES,
)

__all__ = ["DEFAULT_MAX_TERMINAL_BYTES", "ClientV1Renderer"]

DEFAULT_MAX_TERMINAL_BYTES: Final = 256 * 1024
"""How many bytes of each terminal's output a renderer keeps by default (the latest ones)."""


@dataclass(slots=True)
class _Terminal:
    data: bytearray
    command: str | None = None
    exit_status: Mapping[str, Any] | None = None


def _terminal_text(terminal: _Terminal | None) -> str:
    if terminal is None:
        return ""
    parts = []
    output = sanitize_terminal(bytes(terminal.data))
    if terminal.command and not output.startswith(f"$ {terminal.command}"):
        parts.append(f"$ {terminal.command}\n")
    parts.append(output)
    status = terminal.exit_status
    if status is not None:
        if status.get("exitCode") is not None:
            parts.append(f"\n[exit code {status['exitCode']}]")
        elif status.get("signal") is not None:
            parts.append(f"\n[terminated by {status['signal']}]")
        else:
            parts.append("\n[exited]")
    return "".join(parts)


class ClientV1Renderer:
    """Render one session's internal v2 stream for v1 clients.

    One instance per session, shared by all its v1 clients: feed every update of the
    session in order to ``update`` and send the returned v1 ``update`` objects (often
    one, possibly none, sometimes several) to every v1 client. The losses are listed in
    the module docstring. Malformed known variants raise ``InvalidParams``; the state is
    then unchanged. Outputs may share nested objects with the inputs, and the renderer
    keeps references to tool-call content: treat both as immutable.

    ``boolean_options=False`` renders for v1 clients that did not advertise
    ``session.configOptions.boolean`` (boolean options are left out); clients of both
    kinds in one session need one renderer each. Each terminal change re-sends the whole
    content of the tool calls showing it (v1 content replaces), at most
    ``max_terminal_bytes`` of output per terminal.
    """

    def __init__(
        self,
        *,
        max_terminal_bytes: int = DEFAULT_MAX_TERMINAL_BYTES,
        boolean_options: bool = True,
    ) -> None:
        self._max_terminal_bytes = max_terminal_bytes
        self._boolean_options = boolean_options
        self._tools: dict[str, list[Any]] = {}
        self._terminals: dict[str, _Terminal] = {}
        self._sent: set[str] = set()
        self._mode: str | None = None

    def reset(self) -> None:
        """Forget everything (after a ``_hub_reset``, before the snapshot that follows)."""
        self._tools.clear()
        self._terminals.clear()
        self._sent.clear()
        self._mode = None

    def render_replay(self, updates: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Render a replay (e.g. a compaction) for one late v1 joiner.

        Uses a fresh renderer, so this renderer's live state is untouched.
        """
        fresh = ClientV1Renderer(
            max_terminal_bytes=self._max_terminal_bytes, boolean_options=self._boolean_options
        )
        return [out for update in updates for out in fresh.update(update)]

    def update(self, update: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The v1 updates for one internal update."""
        where = "update"
        obj = require_object(update, where)
        variant = require_str(obj, "sessionUpdate", where)
        if variant.startswith("_hub_"):
            return [dict(obj)]
        if variant in CHUNKS:
            message_id = require_str(obj, "messageId", where)
            out = {**obj, "content": block_v2_to_v1(obj.get("content"), f"{where}.content")}
            self._sent.add(message_id)
            return [out]
        if variant in CHUNK_OF_MESSAGE:
            return self._message(CHUNK_OF_MESSAGE[variant], obj)
        if variant == "tool_call_update":
            return [self._tool_call_update(obj)]
        if variant == "tool_call_content_chunk":
            return [self._tool_call_chunk(obj)]
        if variant == "terminal_update":
            return self._terminal_update(obj)
        if variant == "terminal_output_chunk":
            return self._terminal_chunk(obj)
        if variant == "plan_update":
            return self._plan(obj)
        if variant == "available_commands_update":
            return [self._commands(obj)]
        if variant == "config_option_update":
            return self._config_options(obj)
        if variant in SAME_IN_BOTH:
            check(obj)  # one shape in both versions: checked as the fold checks it, and copied
            return [dict(obj)]
        # state_update is implicit in v1; _x and future variants have no v1 form.
        return []

    def plain_chunk(self, update: Mapping[str, Any]) -> None:
        """``update`` of an update the caller found ``is_plain_chunk``: its v1 rendering is
        itself, and only its message is noted (a later whole message replaces it)."""
        self._sent.add(update["messageId"])

    def _message(self, chunk: str, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        where = "update"
        message_id = require_str(obj, "messageId", where)
        if "content" not in obj:
            return []  # a metadata-only patch changes nothing a v1 client shows
        blocks = [] if obj["content"] is None else require_list(obj, "content", where)
        rendered = [
            block_v2_to_v1(block, f"{where}.content[{i}]") for i, block in enumerate(blocks)
        ]
        replaces = message_id in self._sent
        if not rendered:
            if not replaces:
                return []
            rendered = [text("")]
        self._sent.add(message_id)
        out = [{"sessionUpdate": chunk, "messageId": message_id, "content": b} for b in rendered]
        if replaces:
            with_hub_meta(out[0], replaces=message_id)
        return out

    def _terminal(self, terminal_id: str) -> str:
        return _terminal_text(self._terminals.get(terminal_id))

    def _render_tool_content(self, items: list[Any], where: str) -> list[dict[str, Any]]:
        return [
            tool_item_v2_to_v1(item, f"{where}[{i}]", self._terminal)
            for i, item in enumerate(items)
        ]

    def _tool_call_update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        tool_call_id = require_str(obj, "toolCallId", where)
        first = tool_call_id not in self._tools
        items = self._tools.get(tool_call_id, [])
        content: list[dict[str, Any]] | None = None
        if "content" in obj:
            items = [] if obj["content"] is None else list(require_list(obj, "content", where))
            content = self._render_tool_content(items, f"{where}.content")
        elif first:
            content = []
        out = tool_fields_v2_to_v1(obj, where, first=first, content=content)
        self._tools[tool_call_id] = items
        return {"sessionUpdate": "tool_call" if first else "tool_call_update", **out}

    def _tool_call_chunk(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        tool_call_id = require_str(obj, "toolCallId", where)
        first = tool_call_id not in self._tools
        items = [*self._tools.get(tool_call_id, []), obj.get("content")]
        content = self._render_tool_content(items, f"{where}.content")
        self._tools[tool_call_id] = items
        if first:
            return {
                "sessionUpdate": "tool_call",
                "toolCallId": tool_call_id,
                "title": TOOL_TITLE,
                "content": content,
            }
        return {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "content": content}

    def _terminal_update(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        where = "update"
        terminal_id = require_str(obj, "terminalId", where)
        command = optional_str(obj, "command", where)
        data: bytes | None = None
        if obj.get("output") is not None:
            output = require_object(obj["output"], f"{where}.output")
            data = decode_base64(require_str(output, "data", f"{where}.output"), f"{where}.output")
        exit_status = None
        if obj.get("exitStatus") is not None:
            exit_status = require_object(obj["exitStatus"], f"{where}.exitStatus")
        terminal = self._terminals.setdefault(terminal_id, _Terminal(bytearray()))
        if "command" in obj:
            terminal.command = command
        if "output" in obj:
            terminal.data = bytearray()  # a snapshot replaces; null clears
            self._append(terminal, data or b"")
        if "exitStatus" in obj:
            terminal.exit_status = exit_status
        return self._terminal_changed(terminal_id)

    def _terminal_chunk(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        where = "update"
        terminal_id = require_str(obj, "terminalId", where)
        data = decode_base64(require_str(obj, "data", where), where)
        terminal = self._terminals.setdefault(terminal_id, _Terminal(bytearray()))
        self._append(terminal, data)
        return self._terminal_changed(terminal_id)

    def _append(self, terminal: _Terminal, data: bytes) -> None:
        terminal.data += data
        excess = len(terminal.data) - self._max_terminal_bytes
        if excess > 0:
            del terminal.data[:excess]

    def _terminal_changed(self, terminal_id: str) -> list[dict[str, Any]]:
        out = []
        for tool_call_id, items in self._tools.items():
            if any(
                isinstance(item, Mapping)
                and item.get("type") == "terminal"
                and item.get("terminalId") == terminal_id
                for item in items
            ):
                content = self._render_tool_content(items, "content")
                out.append(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": tool_call_id,
                        "content": content,
                    }
                )
        return out

    def _plan(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        where = "update.plan"
        plan = require_object(obj.get("plan"), where)
        kind = require_str(plan, "type", where)
        require_str(plan, "planId", where)
        if kind != "items":
            return []  # markdown/file/_x plans have no v1 form
        entries = []
        for i, raw in enumerate(require_objects(plan, "entries", where)):
            entry = dict(raw)
            hub: dict[str, Any] = {}
            require_str(raw, "content", f"{where}.entries[{i}]")
            priority = require_str(raw, "priority", f"{where}.entries[{i}]")
            status = require_str(raw, "status", f"{where}.entries[{i}]")
            if priority not in V1_PLAN_PRIORITIES:
                entry["priority"], hub["priority"] = "medium", priority
            if status not in V1_PLAN_STATUSES:
                # A cancelled entry is no longer outstanding; "completed" is the v1 value
                # that does not suggest work still to come.
                entry["status"] = "completed" if status == "cancelled" else "pending"
                hub["status"] = status
            entries.append(with_hub_meta(entry, **hub) if hub else entry)
        return [copy_meta(obj, {"sessionUpdate": "plan", "entries": entries})]

    def _commands(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        commands = []
        for i, raw in enumerate(require_objects(obj, "availableCommands", where)):
            require_str(raw, "name", f"{where}.availableCommands[{i}]")
            command = dict(raw)
            given = raw.get("input")
            if given is not None:
                hint = require_object(given, f"{where}.availableCommands[{i}].input")
                if hint.get("type") == "text":
                    require_str(hint, "hint", f"{where}.availableCommands[{i}].input")
                    command["input"] = {k: v for k, v in hint.items() if k != "type"}
                else:
                    del command["input"]  # unknown input kinds have no v1 form
            commands.append(command)
        return {**obj, "availableCommands": commands}

    def _config_options(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        options = require_list(obj, "configOptions", "update")
        out = [
            {
                **obj,
                "configOptions": config_options_v2_to_v1(options, boolean=self._boolean_options),
            }
        ]
        option = mode_option(options)
        mode = option.get("currentValue") if option is not None else None
        if isinstance(mode, str) and mode != self._mode:
            out.append({"sessionUpdate": "current_mode_update", "currentModeId": mode})
        self._mode = mode if isinstance(mode, str) else None
        return out
