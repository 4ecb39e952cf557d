"""The v1 agent side: what a v1 agent says, as the hub's internal v2 update stream.

Theory of operation
-------------------
Inside the hub every session update is a v2 ``update`` object (``docs/internals.md``). An
``AgentV1Translator`` (one per agent session) turns what a v1 *agent* says into v2 updates.
v1 lacks things the v2 model needs
(https://agentclientprotocol.com/protocol/v2/migration#supporting-v1-and-v2-side-by-side), so
the translator mints them: message ids for chunks that carry none, the ``user_message`` and
``state_update`` a v1 agent never sends (in v1 the prompt's response ends the turn), a
``category: "mode"`` config option standing in for v1 session modes (and the route back to
``session/set_mode``).

Errors: a malformed payload of a known variant raises ``InvalidParams`` (the peer's fault);
a well-formed value that v1 cannot express raises ``TranslationError`` (the caller decides:
the hub answers a client's request that a v1 agent cannot take with ``-32048``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hub.protocol.checks import check
from hub.protocol.config_options import MODE_OPTION_NAME, config_options_v1_to_v2, mode_option
from hub.protocol.errors import RpcError, TranslationError
from hub.protocol.shapes import (  # Structural: the shape checks used here, one by one.
    HUB_META,
    check_block,
    copy_meta,
    fail,
    optional_str,
    require_list,
    require_object,
    require_objects,
    require_str,
    with_hub_meta,
)
from hub.protocol.tool_calls import tool_fields_v1_to_v2
from hub.protocol.variants import CHUNKS, SAME_IN_BOTH, V2_UPDATES

__all__ = ["PLAN_ID", "AgentV1Translator"]

PLAN_ID: Final = "main"
"""The plan id of a v1 agent's single plan (v2 plans have ids:
https://agentclientprotocol.com/protocol/v2/migration#plans)."""


def _command_v1_to_v2(command: Mapping[str, Any], where: str) -> dict[str, Any]:
    require_str(command, "name", where)
    require_str(command, "description", where)
    out = dict(command)
    if command.get("input") is not None:
        hint = require_object(command["input"], f"{where}.input")
        require_str(hint, "hint", f"{where}.input")
        out["input"] = {"type": "text", **hint}
    return out


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
        obj = require_object(update, where)
        variant = require_str(obj, "sessionUpdate", where)
        if variant in CHUNKS:
            return [self._chunk(variant, obj)]
        self._run = None
        if variant == "tool_call":
            return [self._tool_call(obj)]
        if variant == "tool_call_update":
            return [{"sessionUpdate": "tool_call_update", **tool_fields_v1_to_v2(obj, where)}]
        if variant == "plan":
            return [self._plan(obj)]
        if variant == "available_commands_update":
            commands = [
                _command_v1_to_v2(command, f"{where}.availableCommands[{i}]")
                for i, command in enumerate(require_objects(obj, "availableCommands", where))
            ]
            return [{**obj, "availableCommands": commands}]
        if variant == "current_mode_update":
            return self.mode_set(require_str(obj, "currentModeId", where))
        if variant == "config_option_update":
            self._set_agent_options(require_list(obj, "configOptions", where))
            return [copy_meta(obj, self._option_update())]
        if variant in SAME_IN_BOTH:
            check(obj)  # one shape in both versions: checked as the fold checks it, and copied
            return [dict(obj)]
        if variant in V2_UPDATES:
            fail(where, f"'{variant}' is not a v1 session update")
        return [dict(obj)]

    def _chunk(self, variant: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        where = "update"
        check_block(obj.get("content"), f"{where}.content")
        message_id = optional_str(obj, "messageId", where)
        if message_id is None:
            # v2 requires message ids; a v1 message ends when the variant changes or
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
        require_str(obj, "title", where)
        fields = tool_fields_v1_to_v2(obj, where)
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
        for i, entry in enumerate(require_objects(obj, "entries", where)):
            for key in ("content", "priority", "status"):
                require_str(entry, key, f"{where}.entries[{i}]")
            entries.append(dict(entry))
        plan = {"type": "items", "planId": PLAN_ID, "entries": entries}
        return copy_meta(obj, {"sessionUpdate": "plan_update", "plan": plan})

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
        obj = require_object(result, where)
        options = obj.get("configOptions")
        modes = obj.get("modes")
        if options is None and modes is None:
            return []
        if modes is not None:
            state = require_object(modes, f"{where}.modes")
            current = require_str(state, "currentModeId", f"{where}.modes")
            available = []
            for i, mode in enumerate(require_objects(state, "availableModes", f"{where}.modes")):
                require_str(mode, "id", f"{where}.modes.availableModes[{i}]")
                require_str(mode, "name", f"{where}.modes.availableModes[{i}]")
                available.append(dict(mode))
            self._modes = available
            self._current_mode = current
        if options is not None:
            self._set_agent_options(require_list(obj, "configOptions", where))
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
        obj = require_object(params, where)
        session_id = require_str(obj, "sessionId", where)
        config_id = require_str(obj, "configId", where)
        kind = require_str(obj, "type", where)
        value = obj.get("value")
        if kind == "id" and not isinstance(value, str):
            fail(where, "an 'id' value must be a string")
        if kind == "boolean" and not isinstance(value, bool):
            fail(where, "a 'boolean' value must be true or false")
        if config_id == self._mode_option_id:
            if kind != "id":
                fail(where, f"the mode option takes an 'id' value, not '{kind}'")
            return "session/set_mode", copy_meta(obj, {"sessionId": session_id, "modeId": value})
        out: dict[str, Any] = {"sessionId": session_id, "configId": config_id}
        if kind == "boolean":
            out["type"] = "boolean"
        elif kind != "id":
            raise TranslationError(f"config value type '{kind}' cannot be sent to a v1 agent")
        out["value"] = value
        return "session/set_config_option", copy_meta(obj, out)

    def set_config_option_result(self, result: Mapping[str, Any]) -> dict[str, Any]:
        """The v2 result for a v1 ``session/set_config_option`` result (the full set)."""
        self._set_agent_options(
            require_list(require_object(result, "result"), "configOptions", "result")
        )
        return {"configOptions": self.config_options}

    def _set_agent_options(self, options: Sequence[Any]) -> None:
        self._agent_options = config_options_v1_to_v2(options)
        self._place_mode_option()

    def _place_mode_option(self) -> None:
        if self._modes is None or mode_option(self._agent_options) is not None:
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
        blocks = [dict(check_block(block, f"prompt[{i}]")) for i, block in enumerate(prompt)]
        self._run = None
        message_id = self.mint_id()
        return message_id, [
            {"sessionUpdate": "user_message", "messageId": message_id, "content": blocks},
            {"sessionUpdate": "state_update", "state": "running"},
        ]

    def prompt_finished(self, stop_reason: str) -> list[dict[str, Any]]:
        """The v1 prompt returned ``{stopReason}``: ``state_update idle`` with it."""
        if not isinstance(stop_reason, str):
            fail("result", "'stopReason' must be a string")
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
        return [with_hub_meta(update, error=error.to_dict())]

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
