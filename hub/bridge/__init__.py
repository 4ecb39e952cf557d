"""``acp-hub bridge``: a stdio ACP agent that an editor spawns, relaying to a hub.

An editor (Zed, a JetBrains or Neovim plugin, an SDK's example client) speaks ACP over stdio to
an agent it starts itself. The bridge is that agent: it answers on stdin/stdout and speaks to a
hub over the hub's WebSocket transport (``/acp``), so that the editor joins shared hub sessions
with the hub's replay, cursors and arbitration. ``hub.bridge.editor`` is the stdio side,
``hub.bridge.link`` opens the WebSocket (and names every way that fails), ``hub.bridge.relay``
is the relay itself, keeping its per-session and per-request records from
``hub.bridge.tracking`` and building its frames with ``hub.bridge.frames``. See
``docs/bridge.md``.
"""
