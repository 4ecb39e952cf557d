"""The folded state of one session: ACP v2 session updates plus the hub's ``_hub_*`` variants.

Theory of operation
-------------------
``SessionState.apply(update)`` folds one v2 ``update`` object (the value of
``params.update`` of a v2 ``session/update``) into the state, with the v2 patch vocabulary
(https://agentclientprotocol.com/protocol/v2/prompt-lifecycle#message-ids,
https://agentclientprotocol.com/protocol/v2/tool-calls#updating): an omitted field leaves the
value unchanged, ``null`` clears it, a value replaces it, arrays replace whole, chunks append
and snapshots replace. "Cleared" and "never set" are the same state, and for collections ``[]``
is the same as ``null``, so two streams that mean the same thing fold to equal snapshots.

Every known variant has a check (``hub.protocol.checks``) and a fold (``_VARIANTS``): the check
validates the whole payload before the fold touches the state, so a malformed payload of a
known variant raises ``InvalidParams`` and changes nothing. ``hub.protocol.checks.check``
runs the check alone, for a caller that must refuse an update without folding it. The removed
v2 names (``tool_call``, ``plan``, ``current_mode_update``) are rejected too: the v2 schema lets
them through as unknown variants, but they must have been translated before they get here.
Unknown variants are kept verbatim, the latest per name.

Messages and tool calls live in one timeline ordered by first appearance, so a compaction
(``hub.protocol.compact``) replays them in the order a live watcher saw them begin.

Two storage choices keep a long session cheap:

* A plain text chunk (``{"type": "text", "text": ...}`` and nothing else) that follows a
  plain text block is merged into it, so the size of a message grows with its text, not
  with its chunk count. Merging happens only on appends; a whole-message ``content`` is
  stored as given, so folding a compaction reproduces the state exactly.
* Terminal output is kept as bytes: each ``terminal_output_chunk`` is base64-decoded on its
  own and appended, so chunk boundaries inside a UTF-8 code point or an ANSI escape do not
  change the result.

Applied updates are treated as immutable: the state keeps references to their values
(content blocks, raw inputs, records) instead of copying them. ``snapshot()`` hands out
fresh containers for everything the state mutates later, and the values inside are shared:
read them, do not mutate them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from hub.protocol.checks import CHECKS, HUB_SNAPSHOTS, Check, variant_of
from hub.protocol.shapes import fail
from hub.protocol.variants import CHUNKS, MESSAGE_OF_CHUNK, MESSAGES, REMOVED_VARIANTS

__all__ = ["SessionState"]

# Tool-call collections for which `[]` means the same as `null` (cleared).
_COLLECTIONS: Final = frozenset({"content", "locations"})

# Plain text chunks are buffered and joined in batches of this many, so a message streamed
# in 100,000 tiny chunks holds a few hundred strings rather than 100,000.
_TEXT_BATCH: Final = 256


# --- helpers of the fold ----------------------------------------------------------------------


def _payload(update: Mapping[str, Any]) -> dict[str, Any]:
    """The update without its discriminator, as a fresh dict."""
    return {k: v for k, v in update.items() if k != "sessionUpdate"}


def _patch(fields: dict[str, Any], update: Mapping[str, Any], skip: frozenset[str]) -> None:
    """Apply the v2 patch vocabulary: omitted unchanged, ``null`` cleared, value replaced."""
    for key, value in update.items():
        if key in skip:
            continue
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value


def _is_plain_text(block: Mapping[str, Any]) -> bool:
    return len(block) == 2 and block.get("type") == "text" and isinstance(block.get("text"), str)


# --- entities -------------------------------------------------------------------------------


class _Text:
    """The text of a trailing plain text block, built from appended pieces."""

    __slots__ = ("batches", "recent")

    def __init__(self, text: str) -> None:
        self.batches: list[str] = [text]
        self.recent: list[str] = []

    def append(self, text: str) -> None:
        self.recent.append(text)
        if len(self.recent) >= _TEXT_BATCH:
            self.batches.append("".join(self.recent))
            self.recent.clear()

    def value(self) -> str:
        """The whole text, kept as the one batch from then on: asked again while no piece
        was appended, it costs no copy (a compaction reads every message's text)."""
        batches = self.batches
        if len(batches) == 1 and not self.recent:
            return batches[0]
        text = "".join(batches) + "".join(self.recent)
        self.batches = [text]
        self.recent.clear()
        return text


class _Message:
    """One message: its kind, its content (``blocks`` plus an optional trailing text) and its
    other patch fields (``_meta`` and any future message field)."""

    __slots__ = ("blocks", "fields", "kind", "tail")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.blocks: list[Any] = []
        self.tail: _Text | None = None
        self.fields: dict[str, Any] = {}

    def replace(self, content: list[Any] | None) -> None:
        blocks = list(content or ())
        self.tail = None
        if blocks and _is_plain_text(blocks[-1]):
            self.tail = _Text(blocks.pop()["text"])
        self.blocks = blocks

    def append(self, block: Mapping[str, Any]) -> None:
        if _is_plain_text(block):
            if self.tail is None:
                self.tail = _Text(block["text"])
            else:
                self.tail.append(block["text"])
            return
        if self.tail is not None:
            self.blocks.append({"type": "text", "text": self.tail.value()})
            self.tail = None
        self.blocks.append(block)

    def content(self) -> list[Any]:
        if self.tail is None:
            return list(self.blocks)
        return [*self.blocks, {"type": "text", "text": self.tail.value()}]


class _ToolCall:
    """One tool call: its patch fields; ``content`` (when present) is a list the state owns."""

    __slots__ = ("fields",)

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}

    def view(self) -> dict[str, Any]:
        view = dict(self.fields)
        if "content" in view:
            view["content"] = list(view["content"])
        return view


class _Terminal:
    """One agent-owned terminal: its patch fields and its output bytes."""

    __slots__ = ("fields", "output")

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.output = bytearray()


_MESSAGE: Final = "message"
_TOOL_CALL: Final = "toolCall"


# --- the fold -------------------------------------------------------------------------------


class SessionState:
    """The fold of one session's updates.

    ``apply`` folds one update; ``snapshot`` gives a canonical JSON-able picture of the
    whole state (equal states give equal snapshots); the properties are the views the hub
    needs. ``hub.protocol.compact.compact`` turns a state back into updates.
    """

    __slots__ = (
        "_chunked",
        "_commands",
        "_config",
        "_extras",
        "_hub",
        "_info",
        "_permissions",
        "_plans",
        "_prompts",
        "_state",
        "_terminals",
        "_timeline",
        "_usage",
    )

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # Keyed by (entity type, id): messages and tool calls interleaved by first appearance.
        self._timeline: dict[tuple[str, str], _Message | _ToolCall] = {}
        self._chunked: _Message | None = None
        """The message the last chunk went to (see ``_fold_message_chunk``)."""
        self._terminals: dict[str, _Terminal] = {}
        self._plans: dict[str, dict[str, Any]] = {}
        self._info: dict[str, Any] = {}
        self._commands: dict[str, Any] | None = None
        self._config: dict[str, Any] | None = None
        self._usage: dict[str, Any] | None = None
        self._state: dict[str, Any] | None = None
        # `_hub_presence`, `_hub_queue`, `_hub_agent`, `_hub_lease`, `_hub_policy` by name.
        self._hub: dict[str, dict[str, Any]] = {}
        self._prompts: dict[str, dict[str, Any]] = {}
        self._permissions: dict[str, dict[str, Any]] = {}
        self._extras: dict[str, dict[str, Any]] = {}

    # -- applying ---------------------------------------------------------------------------

    def apply(self, update: Mapping[str, Any]) -> None:
        """Fold one update into the state.

        Raises ``InvalidParams`` for a payload that is not an object, lacks a string
        ``sessionUpdate``, uses a removed v2 name, or is a malformed known variant; the
        state is then unchanged. Unknown variants are kept (the latest one per name).
        """
        variant = variant_of(update)
        handler = _VARIANTS.get(variant)
        if handler is not None:
            check_variant, fold = handler
            fold(self, variant, update, check_variant(variant, update))
        elif variant in REMOVED_VARIANTS:
            fail(variant, "removed in ACP v2; it must be translated before folding")
        else:
            self._extras[variant] = dict(update)

    def fold_plain_chunk(self, update: Mapping[str, Any]) -> None:
        """``apply`` of an update the caller found ``is_plain_chunk`` (valid by its shape):
        folded without asking again."""
        self._fold_message_chunk(update["sessionUpdate"], update, None)

    def apply_all(self, updates: Iterable[Mapping[str, Any]]) -> SessionState:
        """Fold updates in order and return ``self``. Stops at the first invalid one, with the
        ones before it applied."""
        for update in updates:
            self.apply(update)
        return self

    def _message(self, message_id: str, kind: str) -> _Message:
        key = (_MESSAGE, message_id)
        entity = self._timeline.get(key)
        if entity is None:
            entity = self._timeline[key] = _Message(kind)
        assert isinstance(entity, _Message)
        # A message id names one message; its kind follows the latest word about it.
        entity.kind = kind
        return entity

    def _tool_call(self, tool_call_id: str) -> _ToolCall:
        key = (_TOOL_CALL, tool_call_id)
        entity = self._timeline.get(key)
        if entity is None:
            entity = self._timeline[key] = _ToolCall()
        assert isinstance(entity, _ToolCall)
        return entity

    def _terminal(self, terminal_id: str) -> _Terminal:
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            terminal = self._terminals[terminal_id] = _Terminal()
        return terminal

    # Each fold runs after its variant's check (``_VARIANTS``) passed; ``checked`` is what the
    # check derived (decoded terminal bytes), else ``None``.

    def _fold_message_chunk(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        # The chunk's own `_meta` is scoped to the chunk: nothing to keep
        # (https://agentclientprotocol.com/protocol/v2/migration#extensibility-and-forward-compatibility).
        message = self._message(update["messageId"], MESSAGE_OF_CHUNK[variant])
        previous = self._chunked
        if previous is not message:
            # The stream moved on to another message: join the text of the one it left now,
            # while it streams, not all at once when a late joiner's compaction reads them.
            if previous is not None and previous.tail is not None:
                previous.tail.value()
            self._chunked = message
        message.append(update["content"])

    def _fold_message(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        message = self._message(update["messageId"], variant)
        if "content" in update:
            message.replace(update["content"])
        _patch(message.fields, update, frozenset({"sessionUpdate", "messageId", "content"}))

    def _fold_tool_call_update(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        fields = self._tool_call(update["toolCallId"]).fields
        _patch(fields, update, frozenset({"sessionUpdate", "toolCallId"}))
        for key in _COLLECTIONS:
            value = update.get(key)
            if value is not None:
                if value:
                    fields[key] = list(value)  # owned: chunks append to it
                else:
                    del fields[key]  # `[]` clears, like `null`

    def _fold_tool_call_content_chunk(
        self, variant: str, update: Mapping[str, Any], checked: Any
    ) -> None:
        fields = self._tool_call(update["toolCallId"]).fields
        fields.setdefault("content", []).append(update["content"])

    def _fold_terminal_update(self, variant: str, update: Mapping[str, Any], data: Any) -> None:
        terminal = self._terminal(update["terminalId"])
        _patch(terminal.fields, update, frozenset({"sessionUpdate", "terminalId", "output"}))
        if "output" in update:
            # A replacement snapshot, never merged with what came before.
            terminal.output = bytearray(data or b"")

    def _fold_terminal_output_chunk(
        self, variant: str, update: Mapping[str, Any], data: Any
    ) -> None:
        self._terminal(update["terminalId"]).output += data

    def _fold_plan_update(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        self._plans[update["plan"]["planId"]] = _payload(update)

    def _fold_available_commands_update(
        self, variant: str, update: Mapping[str, Any], checked: Any
    ) -> None:
        self._commands = _payload(update)

    def _fold_config_option_update(
        self, variant: str, update: Mapping[str, Any], checked: Any
    ) -> None:
        self._config = _payload(update)

    def _fold_session_info_update(
        self, variant: str, update: Mapping[str, Any], checked: Any
    ) -> None:
        _patch(self._info, update, frozenset({"sessionUpdate"}))

    def _fold_usage_update(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        self._usage = _payload(update)

    def _fold_state_update(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        self._state = _payload(update)

    # -- the hub's own variants (docs/internals.md) ------------------------------------------

    def _fold_hub_snapshot(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        self._hub[variant] = _payload(update)

    def _fold_hub_presence(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        """The full form replaces; the delta form removes ``removed``, then replaces or
        appends each record of ``added`` (by ``clientId``). Either way the state keeps the
        full form: the list, the counts and what caused the latest change."""
        payload = _payload(update)
        if "clients" not in payload:
            clients = {c["clientId"]: c for c in self._hub.get(variant, {}).get("clients", ())}
            for client_id in payload.pop("removed"):
                clients.pop(client_id, None)
            for record in payload.pop("added"):
                clients[record["clientId"]] = record
            payload = {"clients": list(clients.values()), **payload}
        self._hub[variant] = payload

    def _fold_hub_prompt(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        self._prompts[update["messageId"]] = _payload(update)

    def _fold_hub_permission(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        permission_id = update["permissionId"]
        # Fields merge and `status` replaces.
        merged = {**self._permissions.get(permission_id, {}), **_payload(update)}
        if update["status"] == "pending" and merged.get("request") is None:
            # The one rule that depends on the state: a `pending` update may leave out the
            # request only when the record already holds one.
            fail(variant, "a pending permission needs its 'request'")
        # The request's tool-call subject is not folded into the tool calls here: replaying
        # the record at the end of a compaction would undo later tool-call updates, so the
        # session layer emits that upsert as an ordinary `tool_call_update`.
        self._permissions[permission_id] = merged

    def _fold_hub_reset(self, variant: str, update: Mapping[str, Any], checked: Any) -> None:
        self._reset()

    # -- views ------------------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        """True when nothing is held (a fresh state, or one just reset)."""
        return not (
            self._timeline
            or self._terminals
            or self._plans
            or self._info
            or self._hub
            or self._prompts
            or self._permissions
            or self._extras
            or self._commands is not None
            or self._config is not None
            or self._usage is not None
            or self._state is not None
        )

    @property
    def foreground(self) -> str:
        """The foreground state of the latest ``state_update`` (``idle`` before any)."""
        return "idle" if self._state is None else str(self._state["state"])

    @property
    def stop_reason(self) -> str | None:
        """The ``stopReason`` of the latest ``state_update``, if it carried one."""
        return None if self._state is None else self._state.get("stopReason")

    @property
    def message_ids(self) -> list[str]:
        """Message ids in order of first appearance."""
        return [key[1] for key in self._timeline if key[0] == _MESSAGE]

    @property
    def tool_call_ids(self) -> list[str]:
        """Tool call ids in order of first appearance."""
        return [key[1] for key in self._timeline if key[0] == _TOOL_CALL]

    def message(self, message_id: str) -> dict[str, Any] | None:
        """``{"kind", "content", **fields}`` of a message, or ``None`` when unknown."""
        entity = self._timeline.get((_MESSAGE, message_id))
        if not isinstance(entity, _Message):
            return None
        return {"kind": entity.kind, "content": entity.content(), **entity.fields}

    def tool_call(self, tool_call_id: str) -> dict[str, Any] | None:
        """The fields of a tool call (without ``toolCallId``), or ``None`` when unknown."""
        entity = self._timeline.get((_TOOL_CALL, tool_call_id))
        return entity.view() if isinstance(entity, _ToolCall) else None

    def terminal_output(self, terminal_id: str) -> bytes | None:
        """The output bytes of an agent-owned terminal, or ``None`` when unknown."""
        terminal = self._terminals.get(terminal_id)
        return None if terminal is None else bytes(terminal.output)

    def latest_message(self, kind: str) -> dict[str, Any] | None:
        """The latest message of ``kind`` (``agent_message``, ``user_message`` or
        ``agent_thought``) as ``{"messageId", "kind", "content", **fields}``, or ``None``.

        Walks the timeline back from its end, so the cost is the distance to that message,
        not the length of the session."""
        for (entity_type, entity_id), entity in reversed(self._timeline.items()):
            if entity_type == _MESSAGE and isinstance(entity, _Message) and entity.kind == kind:
                return {
                    "messageId": entity_id,
                    "kind": entity.kind,
                    "content": entity.content(),
                    **entity.fields,
                }
        return None

    def prompt(self, message_id: str) -> dict[str, Any] | None:
        """The ``_hub_prompt`` record of user message ``message_id`` (who sent it), or
        ``None`` when the hub attributed it to nobody."""
        record = self._prompts.get(message_id)
        return None if record is None else dict(record)

    @property
    def pending_permissions(self) -> dict[str, dict[str, Any]]:
        """Permission records whose status is ``pending``, by permission id."""
        return {k: dict(v) for k, v in self._permissions.items() if v.get("status") == "pending"}

    def permission(self, permission_id: str) -> dict[str, Any] | None:
        """The merged ``_hub_permission`` record, or ``None`` when unknown."""
        record = self._permissions.get(permission_id)
        return None if record is None else dict(record)

    @property
    def config_options(self) -> list[Any]:
        """The current config options (``[]`` before any ``config_option_update``)."""
        return [] if self._config is None else list(self._config["configOptions"])

    def extra(self, variant: str) -> dict[str, Any] | None:
        """The latest update of the unknown variant ``variant`` (``_hub_rules``, say)."""
        return self._extras.get(variant)

    @property
    def title(self) -> str | None:
        """The session title from ``session_info_update``."""
        title = self._info.get("title")
        return title if isinstance(title, str) else None

    def hub(self, variant: str) -> dict[str, Any] | None:
        """The latest ``_hub_presence`` / ``_hub_queue`` / ``_hub_agent`` / ``_hub_lease`` /
        ``_hub_policy`` payload (without ``sessionUpdate``), or ``None``."""
        payload = self._hub.get(variant)
        return None if payload is None else dict(payload)

    def snapshot(self) -> dict[str, Any]:
        """A canonical JSON-able picture of the whole state; equal states give equal snapshots.

        ``hub.protocol.compact`` rebuilds updates from it, so it holds everything the state
        holds. Terminal output is base64; ``timeline`` is in first-appearance order.
        """
        timeline: list[dict[str, Any]] = []
        for (kind, entity_id), entity in self._timeline.items():
            if isinstance(entity, _Message):
                timeline.append(
                    {
                        "type": kind,
                        "id": entity_id,
                        "kind": entity.kind,
                        "content": entity.content(),
                        "fields": dict(entity.fields),
                    }
                )
            else:
                timeline.append({"type": kind, "id": entity_id, "fields": entity.view()})
        return {
            "info": dict(self._info),
            "configOptions": _copy(self._config),
            "commands": _copy(self._commands),
            "usage": _copy(self._usage),
            "hub": {k: dict(v) for k, v in self._hub.items()},
            "timeline": timeline,
            "prompts": {k: dict(v) for k, v in self._prompts.items()},
            "terminals": {
                k: {
                    "fields": dict(t.fields),
                    "output": base64.b64encode(t.output).decode("ascii"),
                }
                for k, t in self._terminals.items()
            },
            "plans": {k: dict(v) for k, v in self._plans.items()},
            "permissions": {k: dict(v) for k, v in self._permissions.items()},
            "extras": {k: dict(v) for k, v in self._extras.items()},
            "state": _copy(self._state),
        }


def _copy(payload: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if payload is None else dict(payload)


_Fold = Callable[[SessionState, str, Mapping[str, Any], Any], None]

_S = SessionState
_FOLDS: Final[dict[str, _Fold]] = {
    **dict.fromkeys(CHUNKS, _S._fold_message_chunk),
    **dict.fromkeys(MESSAGES, _S._fold_message),
    "tool_call_update": _S._fold_tool_call_update,
    "tool_call_content_chunk": _S._fold_tool_call_content_chunk,
    "terminal_update": _S._fold_terminal_update,
    "terminal_output_chunk": _S._fold_terminal_output_chunk,
    "plan_update": _S._fold_plan_update,
    "available_commands_update": _S._fold_available_commands_update,
    "config_option_update": _S._fold_config_option_update,
    "session_info_update": _S._fold_session_info_update,
    "usage_update": _S._fold_usage_update,
    "state_update": _S._fold_state_update,
    **dict.fromkeys(HUB_SNAPSHOTS, _S._fold_hub_snapshot),
    "_hub_presence": _S._fold_hub_presence,
    "_hub_prompt": _S._fold_hub_prompt,
    "_hub_permission": _S._fold_hub_permission,
    "_hub_reset": _S._fold_hub_reset,
}

# One lookup per update on the hot path: each known variant with its check, then its fold.
_VARIANTS: Final[dict[str, tuple[Check, _Fold]]] = {
    name: (CHECKS[name], fold) for name, fold in _FOLDS.items()
}
