"""Translation between ACP v1 peers and the hub's internal v2 model.

Theory of operation
-------------------
Inside the hub every session update is a v2 ``update`` object (``docs/internals.md``).
Two stateful translators sit at the edges, one per session each:

* ``AgentV1Translator`` turns what a v1 *agent* says into v2 updates. v1 lacks things the
  v2 model needs, so the translator mints them: message ids for chunks that carry none,
  the ``user_message`` and ``state_update`` a v1 agent never sends, a ``category: "mode"``
  config option standing in for v1 session modes (and the route back to
  ``session/set_mode``).
* ``ClientV1Renderer`` renders the internal v2 stream for v1 *clients*. It is made once per
  session and its output is shared by every v1 client of that session, so it keeps the
  per-stream state v1 needs: which tool calls were announced, accumulated tool-call content
  and terminal bytes, which messages already had content sent, the last mode.
  ``render_replay`` renders a compacted replay for a late joiner with a fresh renderer.

The rest are stateless helpers for the request/response shapes that differ between the
versions (capabilities, auth methods, permission requests and answers, prompts, MCP servers,
config options, stop reasons). The rules follow ``shared/acp-spec/DIGEST.md`` section 12.

Errors: a malformed payload of a known variant raises ``InvalidParams`` (the peer's fault);
a well-formed value that the target version cannot express raises ``TranslationError``.

Deliberate losses towards v1 (v1 cannot say these things; each is documented here and
asserted in the tests):

* v1 *terminal* tool-call content from an agent is rejected with ``InvalidParams``: the hub
  advertises no client terminals, so such content names a terminal nobody created.
* ``tool_call_update``: ``null`` collections become ``[]``; ``null`` title, status, raw
  input/output and ``_meta`` are omitted, so the client keeps its old value; a ``null``
  kind becomes ``other`` (the v1 default). Status ``cancelled`` becomes ``failed`` and an
  unknown status is omitted; unknown kinds become ``other``. The original value is kept in
  ``_meta["acp-hub"]`` (``status`` / ``kind``).
* v2 diffs become a text block holding the patch (``patch.text``), or a description of the
  changes when there is no patch; a single pure text ``add`` becomes a v1 diff with
  ``newText`` rebuilt from the patch.
* Terminals (reference, ``terminal_update``, ``terminal_output_chunk``) become a text block
  in the tool call that references them: ``$ command``, the output decoded as UTF-8 with
  ANSI sequences and control characters removed, and the exit status. The block's
  ``_meta["acp-hub"].terminalId`` names the terminal; every change re-sends the tool
  call's full content (v1 content replaces). Only the last ``max_terminal_bytes`` bytes
  of each terminal are kept.
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
  ``_meta["acp-hub"].block``; unknown tool-call content items likewise.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from hub.protocol.errors import InvalidParams, RpcError, TranslationError

__all__ = [
    "HUB_META",
    "PERMISSION_TITLE",
    "PLAN_ID",
    "TOOL_TITLE",
    "AgentV1Translator",
    "ClientV1Renderer",
    "auth_methods_v1_to_v2",
    "auth_methods_v2_to_v1",
    "capabilities_v1_to_v2",
    "capabilities_v2_to_v1",
    "config_options_v1_to_v2",
    "config_options_v2_to_v1",
    "git_patch",
    "mcp_servers_v1_to_v2",
    "mcp_servers_v2_to_v1",
    "modes_from_config_options",
    "permission_outcome_for_agent",
    "permission_request_v1_to_v2",
    "permission_request_v2_to_v1",
    "prompt_v2_to_v1",
    "sanitize_terminal",
    "set_config_option_v1_to_v2",
    "set_mode_v1_to_v2",
    "stop_reason_for_v1",
]

HUB_META: Final = "acp-hub"
"""The ``_meta`` key under which the hub records what a translation changed."""

PLAN_ID: Final = "main"
"""The plan id of a v1 agent's single plan (``rfds/v2/plan-variants.mdx``)."""

TOOL_TITLE: Final = "Tool call"
"""Title of a v1 ``tool_call`` whose v2 source carried none (v1 requires one)."""

PERMISSION_TITLE: Final = "Permission requested"
"""Title of a v2 permission request made from a v1 tool call without a title."""

MODE_OPTION_NAME: Final = "Mode"
DEFAULT_MAX_TERMINAL_BYTES: Final = 256 * 1024

_CHUNKS: Final = frozenset({"user_message_chunk", "agent_message_chunk", "agent_thought_chunk"})
_MESSAGES: Final = {
    "user_message": "user_message_chunk",
    "agent_message": "agent_message_chunk",
    "agent_thought": "agent_thought_chunk",
}
V1_UPDATES: Final = frozenset(
    {
        *_CHUNKS,
        "tool_call",
        "tool_call_update",
        "plan",
        "available_commands_update",
        "current_mode_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
    }
)
V2_UPDATES: Final = frozenset(
    {
        *_CHUNKS,
        *_MESSAGES,
        "state_update",
        "tool_call_content_chunk",
        "tool_call_update",
        "terminal_update",
        "terminal_output_chunk",
        "plan_update",
        "available_commands_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
    }
)
_V1_STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}
)
_V1_TOOL_STATUSES: Final = frozenset({"pending", "in_progress", "completed", "failed"})
_V1_TOOL_KINDS: Final = frozenset(
    {
        "read",
        "edit",
        "delete",
        "move",
        "search",
        "execute",
        "think",
        "fetch",
        "switch_mode",
        "other",
    }
)
_V1_PLAN_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})
_V1_PLAN_PRIORITIES: Final = frozenset({"high", "medium", "low"})
_V1_CONTENT_TYPES: Final = frozenset({"text", "image", "audio", "resource_link", "resource"})
_V1_PERMISSION_KINDS: Final = frozenset(
    {"allow_once", "allow_always", "reject_once", "reject_always"}
)

# --------------------------------------------------------------------------------------
# Shape checks. Only what translation relies on is checked; the rest passes untouched.


def _bad(where: str, why: str) -> NoReturn:
    raise InvalidParams(f"{where}: {why}")


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    # `type(...) is dict` first: decoded JSON is always a dict, and the ABC check is slow.
    if type(value) is not dict and not isinstance(value, Mapping):
        _bad(where, "expected an object")
    return value


def _str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        _bad(where, f"'{key}' must be a string")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        _bad(where, f"'{key}' must be a string or null")
    return value


def _list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key)
    if not isinstance(value, list):
        _bad(where, f"'{key}' must be an array")
    return value


def _objs(obj: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    return [_obj(item, f"{where}.{key}[{i}]") for i, item in enumerate(_list(obj, key, where))]


def _uint(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        _bad(where, f"'{key}' must be a non-negative integer")
    return value


def _block(value: Any, where: str) -> Mapping[str, Any]:
    block = _obj(value, where)
    _str(block, "type", where)
    return block


def _with_hub_meta(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into ``obj["_meta"]["acp-hub"]`` without clobbering other keys."""
    meta = obj.get("_meta")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    hub = meta.get(HUB_META)
    meta[HUB_META] = {**(hub if isinstance(hub, Mapping) else {}), **fields}
    obj["_meta"] = meta
    return obj


_SAME_IN_BOTH = frozenset({"session_info_update", "usage_update"})


def _same_in_both(variant: str, obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A variant with one shape in v1 and v2 (DIGEST 12, lossless): checked, then copied."""
    if variant == "session_info_update":
        _opt_str(obj, "title", where)
        _opt_str(obj, "updatedAt", where)
    else:
        _uint(obj, "used", where)
        _uint(obj, "size", where)
    return dict(obj)


def _copy_meta(src: Mapping[str, Any], dst: dict[str, Any]) -> dict[str, Any]:
    if src.get("_meta") is not None:
        dst["_meta"] = src["_meta"]
    return dst


# --------------------------------------------------------------------------------------
# Patches and terminal text.

_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def _lines(text: str) -> list[str]:
    # str.splitlines would also split on \r, \v, \f, \x1c...; patches split on \n only.
    return _LINE.findall(text)


def git_patch(path: str, old_text: str | None, new_text: str) -> str:
    """A ``git_patch`` (``diff --git`` section) turning ``old_text`` into ``new_text``.

    ``old_text=None`` is a new file. Paths are absolute and used as they are, as in the
    v2 ``tool-calls`` example; a missing final newline is marked the way git marks it.
    """
    head = [f"diff --git {path} {path}\n"]
    if old_text is None:
        head.append("new file mode 100644\n")
    old = [] if old_text is None else _lines(old_text)
    body = difflib.unified_diff(
        old, _lines(new_text), "/dev/null" if old_text is None else path, path
    )
    return "".join(
        head
        + [
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in body
        ]
    )


_PATCH_HEADERS: Final = ("diff --git ", "new file mode ", "index ", "--- ", "+++ ")


def _added_text(patch: str) -> str | None:
    """The new file's text if ``patch`` is one section that only adds lines, else None."""
    lines = patch.split("\n")
    if patch.endswith("\n"):
        lines.pop()
    if sum(line.startswith("diff --git ") for line in lines) > 1:
        return None
    out: list[str] = []
    in_hunk = False
    for line in lines:
        if line.startswith("@@"):
            in_hunk = True
        elif not in_hunk:
            if line and not line.startswith(_PATCH_HEADERS):
                return None  # e.g. "Binary files differ" or "GIT binary patch"
        elif line.startswith("+"):
            out.append(line[1:] + "\n")
        elif line.startswith("\\") and out:
            out[-1] = out[-1][:-1]
        else:
            return None
    return "".join(out)


_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI (colours, cursor movement)
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC (titles, hyperlinks)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS / SOS / PM / APC strings
    r"|\x1b[ -/]*[0-~]?"  # other escapes, or a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _decode_complete(data: bytes) -> str:
    """UTF-8 text of ``data``, leaving out a character still incomplete at the end (a chunk
    cut inside it is completed by the next chunk) and replacing invalid bytes."""
    end = len(data)
    # Look back at most 3 bytes for the lead byte of a multi-byte sequence.
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte & 0xC0 != 0x80:  # not a continuation byte
            need = (
                2
                if byte & 0xE0 == 0xC0
                else 3
                if byte & 0xF0 == 0xE0
                else 4
                if byte & 0xF8 == 0xF0
                else 1
            )
            if back < need:
                end -= back
            break
    return data[:end].decode("utf-8", errors="replace")


def sanitize_terminal(data: bytes) -> str:
    """Terminal bytes as plain text: UTF-8 (invalid bytes replaced), escapes removed.

    A carriage return inside a line keeps what follows it (progress bars redraw the line),
    backspace and other control characters are removed; newlines and tabs stay.
    """
    text = _ANSI.sub("", _decode_complete(data)).replace("\r\n", "\n")
    lines = []
    for line in text.split("\n"):
        parts = [part for part in line.split("\r") if part]
        lines.append(_CONTROL.sub("", parts[-1] if parts else ""))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# v1 -> v2 pieces.


def _tool_content_v1_to_v2(item: Any, where: str) -> dict[str, Any]:
    obj = _obj(item, where)
    kind = _str(obj, "type", where)
    if kind == "content":
        _block(obj.get("content"), f"{where}.content")
        return dict(obj)
    if kind == "diff":
        path = _str(obj, "path", where)
        new_text = _str(obj, "newText", where)
        old_text = _opt_str(obj, "oldText", where)
        change = {"operation": "add" if old_text is None else "modify", "path": path}
        change["fileType"] = "text"
        out: dict[str, Any] = {
            "type": "diff",
            "changes": [change],
            "patch": {"format": "git_patch", "text": git_patch(path, old_text, new_text)},
        }
        return _copy_meta(obj, out)
    if kind == "terminal":
        # The hub never advertises client terminals to agents (DESIGN section 5), so this
        # names a terminal nobody created; a v2 terminal id would mean something else.
        _bad(where, "terminal content needs the client terminal capability, not offered")
    return dict(obj)  # an unknown item type: the v2 union is open, keep it as it is


def _tool_fields_v1_to_v2(update: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A v1 ``ToolCallUpdate`` as v2 fields: nulls stripped, content translated.

    v1 has no clear operation ("only changed fields need to be included"), so a v1 null
    means "not provided"; passed on, it would clear the field in v2.
    """
    out: dict[str, Any] = {"toolCallId": _str(update, "toolCallId", where)}
    for key, value in update.items():
        if key in ("sessionUpdate", "toolCallId") or value is None:
            continue
        if key in ("title", "kind", "status"):
            _str(update, key, where)
        elif key == "content":
            value = [
                _tool_content_v1_to_v2(item, f"{where}.content[{i}]")
                for i, item in enumerate(_list(update, key, where))
            ]
        elif key == "locations":
            _objs(update, key, where)
        out[key] = value
    return out


def _command_v1_to_v2(command: Mapping[str, Any], where: str) -> dict[str, Any]:
    _str(command, "name", where)
    _str(command, "description", where)
    out = dict(command)
    if command.get("input") is not None:
        hint = _obj(command["input"], f"{where}.input")
        _str(hint, "hint", f"{where}.input")
        out["input"] = {"type": "text", **hint}
    return out


def _rename(obj: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if key == old else key): value for key, value in obj.items()}


def _select_options(option: Mapping[str, Any], group_old: str, group_new: str, where: str) -> Any:
    items = _objs(option, "options", where)
    return [
        _rename(item, group_old, group_new) if group_old in item else dict(item) for item in items
    ]


def config_options_v1_to_v2(options: Sequence[Any]) -> list[dict[str, Any]]:
    """v1 ``SessionConfigOption``s as v2: ``id`` -> ``configId``, ``group`` -> ``groupId``.

    Lossless; option types v1 does not know are kept as they are (v2 is open).
    """
    out = []
    for i, raw in enumerate(options):
        where = f"configOptions[{i}]"
        option = _obj(raw, where)
        _str(option, "id", where)
        _str(option, "name", where)
        kind = _str(option, "type", where)
        converted = _rename(option, "id", "configId")
        if kind == "select":
            _str(option, "currentValue", where)
            converted["options"] = _select_options(option, "group", "groupId", where)
        out.append(converted)
    return out


def config_options_v2_to_v1(
    options: Sequence[Any], *, boolean: bool = True
) -> list[dict[str, Any]]:
    """v2 ``SessionConfigOption``s as v1: ``configId`` -> ``id``, ``groupId`` -> ``group``.

    Option types v1 cannot carry (``_x`` and future ones) are dropped, and ``boolean``
    options too when ``boolean`` is false (a v1 client that did not advertise
    ``session.configOptions.boolean``).
    """
    out = []
    for i, raw in enumerate(options):
        where = f"configOptions[{i}]"
        option = _obj(raw, where)
        _str(option, "configId", where)
        _str(option, "name", where)
        kind = _str(option, "type", where)
        if kind == "select":
            converted = _rename(option, "configId", "id")
            converted["options"] = _select_options(option, "groupId", "group", where)
            out.append(converted)
        elif kind == "boolean" and boolean:
            out.append(_rename(option, "configId", "id"))
    return out


def modes_from_config_options(options: Sequence[Any]) -> dict[str, Any] | None:
    """The v1 ``SessionModeState`` derived from the first ``category: "mode"`` select.

    Grouped choices are flattened. ``None`` when there is no mode option.
    """
    option = _mode_option(options)
    if option is None:
        return None
    modes = []
    for item in _flat_choices(option):
        mode = {"id": item.get("value"), "name": item.get("name")}
        if item.get("description") is not None:
            mode["description"] = item["description"]
        modes.append(mode)
    return {"currentModeId": option.get("currentValue"), "availableModes": modes}


def _mode_option(options: Sequence[Any]) -> Mapping[str, Any] | None:
    for option in options:
        if (
            isinstance(option, Mapping)
            and option.get("category") == "mode"
            and option.get("type") == "select"
        ):
            return option
    return None


def _flat_choices(option: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for item in option.get("options") or []:
        if isinstance(item, Mapping) and isinstance(item.get("options"), list):
            out.extend(choice for choice in item["options"] if isinstance(choice, Mapping))
        elif isinstance(item, Mapping):
            out.append(item)
    return out


# --------------------------------------------------------------------------------------
# v1 agent -> internal v2.


@dataclass(slots=True)
class _Run:
    variant: str
    message_id: str


class AgentV1Translator:
    """Translate one v1 agent session into the hub's v2 update stream.

    One instance per agent session; feed it every ``session/update`` of that session in
    order (``update``) and tell it about the events v1 does not report as updates: a
    prompt forwarded (``prompt_started``), its response (``prompt_finished`` /
    ``prompt_failed``), a permission request pending and answered, and the result of
    ``session/new``, ``session/load`` and ``session/resume`` (``session_setup``). Every
    method returns the v2 updates to append to the session, in order.

    ``id_prefix`` starts every id the translator mints (default ``hub-`` plus eight random
    hex digits and ``-``, so ids from two hub runs never collide).
    """

    def __init__(self, *, id_prefix: str | None = None) -> None:
        self._prefix = id_prefix if id_prefix is not None else f"hub-{uuid.uuid4().hex[:8]}-"
        self._minted = 0
        self._run: _Run | None = None
        self._agent_options: list[dict[str, Any]] = []
        self._modes: list[dict[str, Any]] | None = None
        self._current_mode: str | None = None
        self._mode_option_id: str | None = None
        self._pending_permissions = 0

    # ---- state the caller may read

    @property
    def config_options(self) -> list[dict[str, Any]]:
        """The full current v2 config option set, the synthetic mode option included."""
        options = [dict(option) for option in self._agent_options]
        if self._mode_option_id is not None:
            options.insert(0, self._synthetic_mode_option(self._mode_option_id))
        return options

    @property
    def mode_option_id(self) -> str | None:
        """The ``configId`` of the synthetic mode option, if there is one."""
        return self._mode_option_id

    def mint_id(self) -> str:
        """A fresh hub-minted id (messages)."""
        self._minted += 1
        return f"{self._prefix}{self._minted}"

    # ---- session/update

    def update(self, update: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Translate one v1 ``update`` object into v2 updates (usually exactly one).

        Raises ``InvalidParams`` for a malformed known variant, and for an unknown one
        that bears the name of a v2-only variant (a v1 peer cannot mean the v2 one).
        Other unknown variants are returned unchanged: the v2 union is open.
        """
        where = "update"
        obj = _obj(update, where)
        variant = _str(obj, "sessionUpdate", where)
        if variant in _CHUNKS:
            return [self._chunk(variant, obj)]
        self._run = None
        if variant == "tool_call":
            return [self._tool_call(obj)]
        if variant == "tool_call_update":
            return [{"sessionUpdate": "tool_call_update", **_tool_fields_v1_to_v2(obj, where)}]
        if variant == "plan":
            return [self._plan(obj)]
        if variant == "available_commands_update":
            commands = [
                _command_v1_to_v2(command, f"{where}.availableCommands[{i}]")
                for i, command in enumerate(_objs(obj, "availableCommands", where))
            ]
            return [{**obj, "availableCommands": commands}]
        if variant == "current_mode_update":
            return self.mode_set(_str(obj, "currentModeId", where))
        if variant == "config_option_update":
            self._set_agent_options(_list(obj, "configOptions", where))
            return [_copy_meta(obj, self._option_update())]
        if variant in _SAME_IN_BOTH:
            return [_same_in_both(variant, obj, where)]
        if variant in V2_UPDATES:
            _bad(where, f"'{variant}' is not a v1 session update")
        return [dict(obj)]

    def _chunk(self, variant: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        _block(obj.get("content"), f"{where}.content")
        message_id = _opt_str(obj, "messageId", where)
        if message_id is None:
            # The heuristic of DIGEST 12.1: a message ends when the variant changes or
            # anything else happens in between. Two consecutive same-type messages
            # without ids cannot be told apart.
            if self._run is None or self._run.variant != variant:
                self._run = _Run(variant, self.mint_id())
            message_id = self._run.message_id
        else:
            self._run = None
        return {**obj, "messageId": message_id}

    def _tool_call(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        _str(obj, "title", where)
        fields = _tool_fields_v1_to_v2(obj, where)
        # A v1 tool_call announces the whole tool call: spell out the v1 defaults so that
        # the v2 upsert leaves nothing of an earlier call with the same id behind.
        fields.setdefault("kind", "other")
        fields.setdefault("status", "pending")
        fields.setdefault("content", [])
        fields.setdefault("locations", [])
        return {"sessionUpdate": "tool_call_update", **fields}

    def _plan(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        entries = []
        for i, entry in enumerate(_objs(obj, "entries", where)):
            for key in ("content", "priority", "status"):
                _str(entry, key, f"{where}.entries[{i}]")
            entries.append(dict(entry))
        plan = {"type": "items", "planId": PLAN_ID, "entries": entries}
        return _copy_meta(obj, {"sessionUpdate": "plan_update", "plan": plan})

    # ---- modes and config options

    def session_setup(self, result: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        """Take in a v1 ``session/new``, ``session/load`` or ``session/resume`` result.

        Returns the ``config_option_update`` carrying the full v2 set, a synthetic
        ``category: "mode"`` select standing for the v1 modes when the agent has modes
        but no mode option of its own; nothing when the result has neither (a v1
        ``session/load`` may even answer ``null``).
        """
        if result is None:
            return []
        where = "result"
        obj = _obj(result, where)
        options = obj.get("configOptions")
        modes = obj.get("modes")
        if options is None and modes is None:
            return []
        if modes is not None:
            state = _obj(modes, f"{where}.modes")
            current = _str(state, "currentModeId", f"{where}.modes")
            available = []
            for i, mode in enumerate(_objs(state, "availableModes", f"{where}.modes")):
                _str(mode, "id", f"{where}.modes.availableModes[{i}]")
                _str(mode, "name", f"{where}.modes.availableModes[{i}]")
                available.append(dict(mode))
            self._modes = available
            self._current_mode = current
        if options is not None:
            self._set_agent_options(_list(obj, "configOptions", where))
        else:
            self._place_mode_option()
        return [self._option_update()]

    def mode_set(self, mode_id: str) -> list[dict[str, Any]]:
        """The v1 agent's current mode is now ``mode_id``.

        Called for a ``current_mode_update`` and by the caller after the agent accepted a
        ``session/set_mode`` (v1 agents need not report their own mode change). Returns
        the ``config_option_update`` with the full set - nothing when the agent has its
        own mode config option, which then is the authority and gets its own updates.
        """
        self._current_mode = mode_id
        if self._modes is None:
            self._modes = []
        if all(mode.get("id") != mode_id for mode in self._modes):
            self._modes.append({"id": mode_id, "name": mode_id})
        self._place_mode_option()
        if self._mode_option_id is None:
            return []
        return [self._option_update()]

    def set_config_option(self, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The v1 request (method, params) for a v2 ``session/set_config_option``.

        The synthetic mode option becomes ``session/set_mode``; answer the v2 caller
        after success with ``{"configOptions": translator.config_options}`` once
        ``mode_set`` was called. Otherwise ``type: "id"`` is dropped (v1 untagged values
        are ids) and ``boolean`` stays; other value types raise ``TranslationError``.
        ``set_config_option_result`` translates the v1 agent's answer.
        """
        where = "params"
        obj = _obj(params, where)
        session_id = _str(obj, "sessionId", where)
        config_id = _str(obj, "configId", where)
        kind = _str(obj, "type", where)
        value = obj.get("value")
        if kind == "id" and not isinstance(value, str):
            _bad(where, "an 'id' value must be a string")
        if kind == "boolean" and not isinstance(value, bool):
            _bad(where, "a 'boolean' value must be true or false")
        if config_id == self._mode_option_id:
            if kind != "id":
                _bad(where, f"the mode option takes an 'id' value, not '{kind}'")
            return "session/set_mode", _copy_meta(obj, {"sessionId": session_id, "modeId": value})
        out: dict[str, Any] = {"sessionId": session_id, "configId": config_id}
        if kind == "boolean":
            out["type"] = "boolean"
        elif kind != "id":
            raise TranslationError(f"config value type '{kind}' cannot be sent to a v1 agent")
        out["value"] = value
        return "session/set_config_option", _copy_meta(obj, out)

    def set_config_option_result(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """The v2 result for a v1 ``session/set_config_option`` result (the full set)."""
        self._set_agent_options(_list(_obj(result, "result"), "configOptions", "result"))
        return {"configOptions": self.config_options}

    def _set_agent_options(self, options: Sequence[Any]) -> None:
        self._agent_options = config_options_v1_to_v2(options)
        self._place_mode_option()

    def _place_mode_option(self) -> None:
        if self._modes is None or _mode_option(self._agent_options) is not None:
            self._mode_option_id = None
            return
        taken = {option.get("configId") for option in self._agent_options}
        if self._mode_option_id is None or self._mode_option_id in taken:
            candidate, n = "mode", 1
            while candidate in taken:
                n += 1
                candidate = f"_hub_mode_{n}"
            self._mode_option_id = candidate

    def _synthetic_mode_option(self, config_id: str) -> dict[str, Any]:
        choices = []
        for mode in self._modes or []:
            choice = {"value": mode["id"], "name": mode["name"]}
            if mode.get("description") is not None:
                choice["description"] = mode["description"]
            choices.append(choice)
        return {
            "configId": config_id,
            "name": MODE_OPTION_NAME,
            "category": "mode",
            "type": "select",
            "currentValue": self._current_mode,
            "options": choices,
            "_meta": {HUB_META: {"source": "modes"}},
        }

    def _option_update(self) -> dict[str, Any]:
        return {"sessionUpdate": "config_option_update", "configOptions": self.config_options}

    # ---- the prompt turn

    def prompt_started(self, prompt: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
        """A prompt was forwarded to the v1 agent, which will not echo it.

        Returns the minted user message id and the ``user_message`` carrying the prompt
        followed by ``state_update running``.
        """
        blocks = [dict(_block(block, f"prompt[{i}]")) for i, block in enumerate(prompt)]
        self._run = None
        message_id = self.mint_id()
        return message_id, [
            {"sessionUpdate": "user_message", "messageId": message_id, "content": blocks},
            {"sessionUpdate": "state_update", "state": "running"},
        ]

    def prompt_finished(self, stop_reason: str) -> list[dict[str, Any]]:
        """The v1 prompt returned ``{stopReason}``: ``state_update idle`` with it."""
        if not isinstance(stop_reason, str):
            _bad("result", "'stopReason' must be a string")
        self._run = None
        self._pending_permissions = 0
        return [{"sessionUpdate": "state_update", "state": "idle", "stopReason": stop_reason}]

    def prompt_failed(self, error: RpcError) -> list[dict[str, Any]]:
        """The v1 prompt failed: ``idle`` without a stop reason, the error in ``_meta``.

        The v2 prompt was already acknowledged, so the error can no longer be the answer.
        """
        self._run = None
        self._pending_permissions = 0
        update = {"sessionUpdate": "state_update", "state": "idle"}
        return [_with_hub_meta(update, error=error.to_dict())]

    def permission_pending(self) -> list[dict[str, Any]]:
        """A permission request is waiting: ``state_update requires_action``."""
        self._run = None
        self._pending_permissions += 1
        return [{"sessionUpdate": "state_update", "state": "requires_action"}]

    def permission_answered(self) -> list[dict[str, Any]]:
        """A permission request was resolved: ``running`` once none is left waiting.

        Nothing when others still wait or the turn already ended.
        """
        if self._pending_permissions == 0:
            return []
        self._run = None
        self._pending_permissions -= 1
        if self._pending_permissions:
            return []
        return [{"sessionUpdate": "state_update", "state": "running"}]


# --------------------------------------------------------------------------------------
# internal v2 -> v1 pieces.


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _block_v2_to_v1(value: Any, where: str) -> dict[str, Any]:
    block = _block(value, where)
    kind = block["type"]
    if kind not in _V1_CONTENT_TYPES:
        return _with_hub_meta(_text(f"[unsupported content: {kind}]"), block=dict(block))
    out = dict(block)
    if kind == "resource_link":
        out.pop("icons", None)  # v2 only
    return out


def _diff_v2_to_v1(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    changes = _objs(item, "changes", where)
    for i, change in enumerate(changes):
        _str(change, "operation", f"{where}.changes[{i}]")
        _str(change, "path", f"{where}.changes[{i}]")
    patch = item.get("patch")
    text: str | None = None
    if patch is not None:
        patch = _obj(patch, f"{where}.patch")
        _str(patch, "format", f"{where}.patch")
        text = _str(patch, "text", f"{where}.patch")
    if (
        text is not None
        and patch is not None
        and patch["format"] == "git_patch"
        and len(changes) == 1
        and changes[0]["operation"] == "add"
        and changes[0].get("fileType") in (None, "text")
    ):
        new_text = _added_text(text)
        if new_text is not None:
            return _copy_meta(
                item, {"type": "diff", "path": changes[0]["path"], "newText": new_text}
            )
    if text is None:
        lines = []
        for change in changes:
            old = change.get("oldPath")
            source = f"{old} -> " if isinstance(old, str) else ""
            lines.append(f"{change['operation']} {source}{change['path']}")
        text = "\n".join(lines)
    return _with_hub_meta(
        {"type": "content", "content": _text(text)}, diff={"changes": [dict(c) for c in changes]}
    )


def _tool_item_v2_to_v1(value: Any, where: str, terminal: Callable[[str], str]) -> dict[str, Any]:
    item = _obj(value, where)
    kind = _str(item, "type", where)
    if kind == "content":
        out = {
            "type": "content",
            "content": _block_v2_to_v1(item.get("content"), f"{where}.content"),
        }
        return _copy_meta(item, out)
    if kind == "diff":
        return _diff_v2_to_v1(item, where)
    if kind == "terminal":
        terminal_id = _str(item, "terminalId", where)
        out = {"type": "content", "content": _text(terminal(terminal_id))}
        return _with_hub_meta(out, terminalId=terminal_id)
    return _with_hub_meta(
        {"type": "content", "content": _text(f"[unsupported tool call content: {kind}]")},
        item=dict(item),
    )


def _tool_fields_v2_to_v1(
    update: Mapping[str, Any], where: str, *, first: bool, content: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """v2 tool-call patch fields as v1 (see the module docstring for the losses)."""
    out: dict[str, Any] = {"toolCallId": _str(update, "toolCallId", where)}
    hub: dict[str, Any] = {}
    title = _opt_str(update, "title", where)
    if title is not None:
        out["title"] = title
    elif first:
        out["title"] = TOOL_TITLE
    kind = _opt_str(update, "kind", where)
    if kind is not None:
        out["kind"] = kind if kind in _V1_TOOL_KINDS else "other"
        if kind not in _V1_TOOL_KINDS:
            hub["kind"] = kind
    elif "kind" in update and not first:
        out["kind"] = "other"  # a cleared kind reads as the v1 default
    status = _opt_str(update, "status", where)
    if status is not None and status in _V1_TOOL_STATUSES:
        out["status"] = status
    elif status is not None:
        hub["status"] = status
        if status == "cancelled":
            out["status"] = "failed"
    if content is not None:
        out["content"] = content
    if "locations" in update:
        locations = update["locations"]
        out["locations"] = (
            [] if locations is None else [dict(x) for x in _objs(update, "locations", where)]
        )
    for key in ("rawInput", "rawOutput", "_meta"):
        if update.get(key) is not None:
            out[key] = update[key]
    if hub:
        _with_hub_meta(out, **hub)
    return out


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


def _decode_base64(value: str, where: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        _bad(where, "'data' is not valid base64")


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
        obj = _obj(update, where)
        variant = _str(obj, "sessionUpdate", where)
        if variant.startswith("_hub_"):
            return [dict(obj)]
        if variant in _CHUNKS:
            message_id = _str(obj, "messageId", where)
            out = {**obj, "content": _block_v2_to_v1(obj.get("content"), f"{where}.content")}
            self._sent.add(message_id)
            return [out]
        if variant in _MESSAGES:
            return self._message(_MESSAGES[variant], obj)
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
        if variant in _SAME_IN_BOTH:
            return [_same_in_both(variant, obj, where)]
        # state_update is implicit in v1; _x and future variants have no v1 form.
        return []

    def _message(self, chunk: str, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        where = "update"
        message_id = _str(obj, "messageId", where)
        if "content" not in obj:
            return []  # a metadata-only patch changes nothing a v1 client shows
        blocks = [] if obj["content"] is None else _list(obj, "content", where)
        rendered = [
            _block_v2_to_v1(block, f"{where}.content[{i}]") for i, block in enumerate(blocks)
        ]
        replaces = message_id in self._sent
        if not rendered:
            if not replaces:
                return []
            rendered = [_text("")]
        self._sent.add(message_id)
        out = [{"sessionUpdate": chunk, "messageId": message_id, "content": b} for b in rendered]
        if replaces:
            _with_hub_meta(out[0], replaces=message_id)
        return out

    def _terminal(self, terminal_id: str) -> str:
        return _terminal_text(self._terminals.get(terminal_id))

    def _render_tool_content(self, items: list[Any], where: str) -> list[dict[str, Any]]:
        return [
            _tool_item_v2_to_v1(item, f"{where}[{i}]", self._terminal)
            for i, item in enumerate(items)
        ]

    def _tool_call_update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        tool_call_id = _str(obj, "toolCallId", where)
        first = tool_call_id not in self._tools
        items = self._tools.get(tool_call_id, [])
        content: list[dict[str, Any]] | None = None
        if "content" in obj:
            items = [] if obj["content"] is None else list(_list(obj, "content", where))
            content = self._render_tool_content(items, f"{where}.content")
        elif first:
            content = []
        out = _tool_fields_v2_to_v1(obj, where, first=first, content=content)
        self._tools[tool_call_id] = items
        return {"sessionUpdate": "tool_call" if first else "tool_call_update", **out}

    def _tool_call_chunk(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        tool_call_id = _str(obj, "toolCallId", where)
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
        terminal_id = _str(obj, "terminalId", where)
        command = _opt_str(obj, "command", where)
        data: bytes | None = None
        if obj.get("output") is not None:
            output = _obj(obj["output"], f"{where}.output")
            data = _decode_base64(_str(output, "data", f"{where}.output"), f"{where}.output")
        exit_status = None
        if obj.get("exitStatus") is not None:
            exit_status = _obj(obj["exitStatus"], f"{where}.exitStatus")
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
        terminal_id = _str(obj, "terminalId", where)
        data = _decode_base64(_str(obj, "data", where), where)
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
        plan = _obj(obj.get("plan"), where)
        kind = _str(plan, "type", where)
        _str(plan, "planId", where)
        if kind != "items":
            return []  # markdown/file/_x plans have no v1 form
        entries = []
        for i, raw in enumerate(_objs(plan, "entries", where)):
            entry = dict(raw)
            hub: dict[str, Any] = {}
            _str(raw, "content", f"{where}.entries[{i}]")
            priority = _str(raw, "priority", f"{where}.entries[{i}]")
            status = _str(raw, "status", f"{where}.entries[{i}]")
            if priority not in _V1_PLAN_PRIORITIES:
                entry["priority"], hub["priority"] = "medium", priority
            if status not in _V1_PLAN_STATUSES:
                # A cancelled entry is no longer outstanding; "completed" is the v1 value
                # that does not suggest work still to come.
                entry["status"] = "completed" if status == "cancelled" else "pending"
                hub["status"] = status
            entries.append(_with_hub_meta(entry, **hub) if hub else entry)
        return [_copy_meta(obj, {"sessionUpdate": "plan", "entries": entries})]

    def _commands(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        commands = []
        for i, raw in enumerate(_objs(obj, "availableCommands", where)):
            _str(raw, "name", f"{where}.availableCommands[{i}]")
            command = dict(raw)
            given = raw.get("input")
            if given is not None:
                hint = _obj(given, f"{where}.availableCommands[{i}].input")
                if hint.get("type") == "text":
                    _str(hint, "hint", f"{where}.availableCommands[{i}].input")
                    command["input"] = {k: v for k, v in hint.items() if k != "type"}
                else:
                    del command["input"]  # unknown input kinds have no v1 form
            commands.append(command)
        return {**obj, "availableCommands": commands}

    def _config_options(self, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        options = _list(obj, "configOptions", "update")
        out = [
            {
                **obj,
                "configOptions": config_options_v2_to_v1(options, boolean=self._boolean_options),
            }
        ]
        mode_option = _mode_option(options)
        mode = mode_option.get("currentValue") if mode_option is not None else None
        if isinstance(mode, str) and mode != self._mode:
            out.append({"sessionUpdate": "current_mode_update", "currentModeId": mode})
        self._mode = mode if isinstance(mode, str) else None
        return out


# --------------------------------------------------------------------------------------
# Stateless helpers for requests and responses.


def _permission_options(params: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    options = _objs(params, "options", where)
    for i, option in enumerate(options):
        for key in ("optionId", "name", "kind"):
            _str(option, key, f"{where}.options[{i}]")
    return options


def permission_request_v1_to_v2(params: Mapping[str, Any]) -> dict[str, Any]:
    """v1 ``session/request_permission`` params as v2.

    The tool call becomes a ``tool_call`` subject (nulls stripped, diffs translated); its
    title, which v1 agents often fill with the question, becomes the request title.
    """
    where = "params"
    obj = _obj(params, where)
    session_id = _str(obj, "sessionId", where)
    tool_call = _tool_fields_v1_to_v2(
        _obj(obj.get("toolCall"), f"{where}.toolCall"), f"{where}.toolCall"
    )
    options = _permission_options(obj, where)
    if not options:
        _bad(where, "'options' must not be empty")
    out = {
        "sessionId": session_id,
        "title": tool_call.get("title", PERMISSION_TITLE),
        "subject": {"type": "tool_call", "toolCall": tool_call},
        "options": [dict(option) for option in options],
    }
    return _copy_meta(obj, out)


def permission_request_v2_to_v1(params: Mapping[str, Any]) -> dict[str, Any]:
    """v2 ``session/request_permission`` params as v1 (DIGEST 12.2).

    A ``tool_call`` subject gives its tool call (titled with the request title when it
    has none); a ``command`` subject becomes an ``execute`` tool call with
    ``rawInput: {command, cwd}`` under the subject's tool call id or a fresh one; no (or
    an unknown) subject gives a fresh tool call carrying the title. The description goes
    into a text content item of a fresh tool call (never into an existing one, whose
    content it would replace). ``_meta["acp-hub"]`` keeps title, description and an
    unknown subject. Unknown option kinds become ``reject_once`` (the original in the
    option's ``_meta``): the kind only styles the button, the option id decides.
    """
    where = "params"
    obj = _obj(params, where)
    session_id = _str(obj, "sessionId", where)
    title = _str(obj, "title", where)
    description = _opt_str(obj, "description", where)
    options = _permission_options(obj, where)
    hub: dict[str, Any] = {"title": title}
    if description is not None:
        hub["description"] = description
    fresh = f"hub-permission-{uuid.uuid4().hex}"
    tool: dict[str, Any] = {"toolCallId": fresh, "title": title}
    if obj.get("subject") is not None:
        subject = _obj(obj["subject"], f"{where}.subject")
        kind = _str(subject, "type", f"{where}.subject")
        if kind == "tool_call":
            source = _obj(subject.get("toolCall"), f"{where}.subject.toolCall")
            content = None
            if source.get("content") is not None:
                content = [
                    _tool_item_v2_to_v1(
                        item, f"{where}.subject.toolCall.content[{i}]", _terminal_ref
                    )
                    for i, item in enumerate(_list(source, "content", f"{where}.subject.toolCall"))
                ]
            tool = _tool_fields_v2_to_v1(
                source, f"{where}.subject.toolCall", first=False, content=content
            )
            tool.setdefault("title", title)
        elif kind == "command":
            command = _str(subject, "command", f"{where}.subject")
            cwd = _str(subject, "cwd", f"{where}.subject")
            given = _opt_str(subject, "toolCallId", f"{where}.subject")
            tool = {
                "toolCallId": given or fresh,
                "title": title,
                "kind": "execute",
                "rawInput": {"command": command, "cwd": cwd},
            }
        else:
            hub["subject"] = dict(subject)
    if description is not None and tool["toolCallId"] == fresh:
        tool["content"] = [{"type": "content", "content": _text(description)}]
    v1_options = []
    for option in options:
        converted = dict(option)
        if option["kind"] not in _V1_PERMISSION_KINDS:
            converted["kind"] = "reject_once"
            _with_hub_meta(converted, kind=option["kind"])
        v1_options.append(converted)
    out = {"sessionId": session_id, "toolCall": tool, "options": v1_options}
    if obj.get("_meta") is not None:
        out["_meta"] = obj["_meta"]
    return _with_hub_meta(out, **hub)


def _terminal_ref(terminal_id: str) -> str:
    return f"[terminal {terminal_id}]"


def permission_outcome_for_agent(outcome: Any, options: Sequence[Any]) -> dict[str, Any]:
    """Validate a client's permission ``outcome`` object against the request's options.

    Returns the outcome to send to the agent: ``{"outcome": "selected", "optionId"}``
    with an option id of ``options``, or ``{"outcome": "cancelled"}`` (``_meta`` kept).
    Anything else - an unknown outcome, an unknown option, a malformed object - raises
    ``InvalidParams``: an answer the hub does not understand never counts as approval.
    """
    where = "outcome"
    obj = _obj(outcome, where)
    kind = _str(obj, "outcome", where)
    if kind == "cancelled":
        return _copy_meta(obj, {"outcome": "cancelled"})
    if kind != "selected":
        _bad(where, f"unknown outcome '{kind}'")
    option_id = _str(obj, "optionId", where)
    known = {option.get("optionId") for option in options if isinstance(option, Mapping)}
    if option_id not in known:
        _bad(where, f"unknown option '{option_id}'")
    return _copy_meta(obj, {"outcome": "selected", "optionId": option_id})


def capabilities_v1_to_v2(capabilities: Mapping[str, Any] | None) -> dict[str, Any]:
    """A v1 agent's ``agentCapabilities`` as v2 ``capabilities`` (DIGEST 12.1).

    Booleans become ``{}`` when true; stdio MCP is always there (mandatory in v1), SSE has
    no v2 form. ``list``/``resume``/``close`` are v2 baseline, which the hub serves itself
    where the agent lacks them, and ``auth.logout`` is implied by v2 auth methods.
    """
    caps = _obj(capabilities or {}, "agentCapabilities")
    prompt = _obj(caps.get("promptCapabilities") or {}, "promptCapabilities")
    mcp = _obj(caps.get("mcpCapabilities") or {}, "mcpCapabilities")
    sessions = _obj(caps.get("sessionCapabilities") or {}, "sessionCapabilities")
    session: dict[str, Any] = {
        "prompt": {
            key: {} for key in ("image", "audio", "embeddedContext") if prompt.get(key) is True
        },
        "mcp": {"stdio": {}, **({"http": {}} if mcp.get("http") is True else {})},
    }
    for key in ("delete", "additionalDirectories"):
        if sessions.get(key) is not None:
            session[key] = dict(_obj(sessions[key], f"sessionCapabilities.{key}"))
    return _copy_meta(caps, {"session": session})


def capabilities_v2_to_v1(
    capabilities: Mapping[str, Any] | None, *, auth_methods: bool = False
) -> dict[str, Any]:
    """A v2 agent's ``capabilities`` as v1 ``agentCapabilities`` (DIGEST 12.2).

    The hub replays sessions itself, so ``loadSession`` and ``list``/``resume``/``close``
    are always offered; ``auth.logout`` when the agent has auth methods.
    """
    caps = _obj(capabilities or {}, "capabilities")
    session = _obj(caps.get("session") or {}, "capabilities.session")
    prompt = _obj(session.get("prompt") or {}, "capabilities.session.prompt")
    mcp = _obj(session.get("mcp") or {}, "capabilities.session.mcp")
    sessions: dict[str, Any] = {"list": {}, "resume": {}, "close": {}}
    for key in ("delete", "additionalDirectories"):
        if session.get(key) is not None:
            sessions[key] = dict(_obj(session[key], f"capabilities.session.{key}"))
    out: dict[str, Any] = {
        "loadSession": True,
        "promptCapabilities": {
            key: prompt.get(key) is not None for key in ("image", "audio", "embeddedContext")
        },
        "mcpCapabilities": {"http": mcp.get("http") is not None, "sse": False},
        "sessionCapabilities": sessions,
    }
    if auth_methods:
        out["auth"] = {"logout": {}}
    return _copy_meta(caps, out)


def prompt_v2_to_v1(blocks: Sequence[Any]) -> list[dict[str, Any]]:
    """v2 prompt content for a v1 agent: ``resource_link.icons`` stripped.

    A block type v1 does not define raises ``TranslationError``.
    """
    out = []
    for i, raw in enumerate(blocks):
        block = _block(raw, f"prompt[{i}]")
        if block["type"] not in _V1_CONTENT_TYPES:
            raise TranslationError(f"prompt[{i}]: content type '{block['type']}' has no v1 form")
        out.append(_block_v2_to_v1(block, f"prompt[{i}]"))
    return out


def mcp_servers_v2_to_v1(
    servers: Sequence[Any] | None, *, http: bool = True
) -> list[dict[str, Any]]:
    """v2 MCP server entries for a v1 ``session/new``/``load``/``resume``.

    stdio entries lose their ``type`` and get ``args``/``env`` defaults; http entries get
    ``headers: []``. An http entry for an agent without http support (``http=False``) and
    any other type raise ``TranslationError``.
    """
    out = []
    for i, raw in enumerate(servers or []):
        where = f"mcpServers[{i}]"
        server = _obj(raw, where)
        kind = _str(server, "type", where)
        _str(server, "name", where)
        if kind == "stdio":
            _str(server, "command", where)
            entry = {k: v for k, v in server.items() if k != "type"}
            entry["args"] = server.get("args") or []
            entry["env"] = server.get("env") or []
        elif kind == "http" and http:
            _str(server, "url", where)
            entry = dict(server)
            entry["headers"] = server.get("headers") or []
        else:
            raise TranslationError(f"{where}: the agent cannot take an MCP server of type '{kind}'")
        out.append(entry)
    return out


def mcp_servers_v1_to_v2(servers: Sequence[Any] | None) -> list[dict[str, Any]]:
    """v1 MCP server entries as v2: untagged entries are stdio; ``sse`` has no v2 form."""
    out = []
    for i, raw in enumerate(servers or []):
        where = f"mcpServers[{i}]"
        server = _obj(raw, where)
        _str(server, "name", where)
        kind = server.get("type")
        if kind is None:
            _str(server, "command", where)
            out.append({"type": "stdio", **server})
        elif kind == "http":
            _str(server, "url", where)
            out.append(dict(server))
        elif kind == "sse":
            raise TranslationError(f"{where}: SSE MCP servers do not exist in v2")
        else:
            _bad(where, f"unknown MCP server type {kind!r}")
    return out


def set_config_option_v1_to_v2(params: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 ``session/set_config_option`` as v2: an untagged value is ``type: "id"``."""
    where = "params"
    obj = _obj(params, where)
    _str(obj, "sessionId", where)
    _str(obj, "configId", where)
    if obj.get("type") == "boolean":
        if not isinstance(obj.get("value"), bool):
            _bad(where, "a 'boolean' value must be true or false")
        return dict(obj)
    if "type" in obj:
        _bad(where, f"unknown value type {obj['type']!r}")
    _str(obj, "value", where)
    return {**obj, "type": "id"}


def set_mode_v1_to_v2(params: Mapping[str, Any], options: Sequence[Any]) -> dict[str, Any]:
    """A v1 ``session/set_mode`` as a v2 ``session/set_config_option`` on the mode option.

    ``options`` is the session's current v2 config option set; without a mode option
    there is nothing to set and ``TranslationError`` is raised.
    """
    where = "params"
    obj = _obj(params, where)
    session_id = _str(obj, "sessionId", where)
    mode_id = _str(obj, "modeId", where)
    option = _mode_option(options)
    if option is None:
        raise TranslationError("the session has no mode option")
    out = {
        "sessionId": session_id,
        "configId": option.get("configId"),
        "type": "id",
        "value": mode_id,
    }
    return _copy_meta(obj, out)


def auth_methods_v1_to_v2(methods: Sequence[Any] | None) -> list[dict[str, Any]]:
    """v1 ``authMethods`` as v2: ``id`` -> ``methodId``, no ``type`` means ``agent``,
    a terminal method's ``env`` map becomes a ``[{name, value}]`` list."""
    out = []
    for i, raw in enumerate(methods or []):
        where = f"authMethods[{i}]"
        method = _obj(raw, where)
        _str(method, "id", where)
        _str(method, "name", where)
        converted = _rename(method, "id", "methodId")
        converted["type"] = method.get("type") or "agent"
        env = method.get("env")
        if converted["type"] == "terminal" and env is not None:
            env = _obj(env, f"{where}.env")
            converted["env"] = [{"name": k, "value": v} for k, v in env.items()]
        out.append(converted)
    return out


def auth_methods_v2_to_v1(methods: Sequence[Any] | None) -> list[dict[str, Any]]:
    """v2 ``authMethods`` as v1: ``methodId`` -> ``id``, ``type`` kept only for
    ``terminal`` (whose ``env`` list becomes a map); ``_x`` types have no v1 form and are
    dropped."""
    out = []
    for i, raw in enumerate(methods or []):
        where = f"authMethods[{i}]"
        method = _obj(raw, where)
        _str(method, "methodId", where)
        _str(method, "name", where)
        kind = _str(method, "type", where)
        if kind not in ("agent", "terminal"):
            continue
        converted = _rename(method, "methodId", "id")
        if kind == "agent":
            del converted["type"]
        elif method.get("env") is not None:
            env = _objs(method, "env", where)
            converted["env"] = {
                _str(var, "name", f"{where}.env"): _str(var, "value", f"{where}.env") for var in env
            }
        out.append(converted)
    return out


def stop_reason_for_v1(reason: str) -> str:
    """A v2 stop reason for a v1 client: the v1 enum is closed, others become ``end_turn``."""
    return reason if reason in _V1_STOP_REASONS else "end_turn"
