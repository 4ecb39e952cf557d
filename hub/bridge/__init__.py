"""``acp-hub bridge``: a stdio ACP agent that an editor spawns, relaying to a hub.

An editor (Zed, a JetBrains or Neovim plugin, an SDK's example client) speaks ACP over stdio to
an agent it starts itself. The bridge is that agent: it answers on stdin/stdout and speaks to a
hub over the hub's WebSocket transport (``/acp``), so that the editor joins shared hub sessions
with the hub's replay, cursors and arbitration.

Like ``hub.protocol``, the bridge is sans-I/O at its core: ``hub.bridge.core.Relay`` is the
relay's state machine; it takes the editor's lines, the hub's frames and the link's events and
returns ``hub.bridge.actions``. Its parts are ``cursors``, ``prompts`` (prompt settlement),
``dialogs`` (the hub's requests shown to the editor), ``backoff``, the records of ``tracking``
and the frames of ``frames``. The I/O around it: ``hub.bridge.editor`` is the stdio side,
``hub.bridge.link`` opens the WebSocket (and names every way that fails), ``hub.bridge.relay``
runs the tasks and carries the core's actions out. See ``docs/bridge.md`` and
``docs/internals.md``.
"""
