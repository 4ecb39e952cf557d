"""The bridge's I/O: an ACP agent on stdio towards the editor, a hub client over WebSocket.

Theory of operation
-------------------
The bridge speaks to the hub in the protocol version the editor asked for (``min(asked, 2)``):
the hub translates between its agents and each client, so the bridge only relays, remapping
request ids in both directions. It adds what an editor cannot do itself:

* **Sessions.** ``session/new`` starts a hub session on ``--agent`` (else the hub's default);
  with ``--session ID`` the editor's first ``session/new`` attaches to that shared session
  instead (``session/resume`` with the whole state replayed), answered with ``ID``, and the
  replay follows the answer so that the editor knows the session it belongs to. ``session/load``,
  ``session/resume`` and ``session/list`` are the hub's.
* **Cursors.** Every ``session/update`` from the hub carries ``(epoch, seq)``
  (``docs/protocol.md``); the bridge keeps the last one per session. v1 connections ask for the
  hub's events so that their seqs are contiguous too. The ``_hub_*`` updates are read by the
  bridge and not passed on: an editor does not know them.
* **Reconnects.** When the WebSocket drops, the bridge reconnects (backing off, for at most
  ``reconnect_window`` seconds) and resumes each session with ``replayFrom: _hub_after`` its
  cursor: the hub sends exactly the events after it, so the editor sees no gap and no
  duplicate (an update below the cursor would be dropped). Editor requests wait for the
  link meanwhile. A request that was in flight is settled after the resume: a prompt the hub
  had started (a ``_hub_prompt`` naming one of the bridge's connections) is answered from the
  session's events (v2: its message id; v1: the turn's stop reason), one it never started is
  sent again, ``session/new`` fails (it may or may not have happened), anything else is sent
  again. Permission requests that the hub offers again on the new connection are matched to
  the editor's open dialog by their ``permissionId``; one resolved meanwhile is withdrawn
  from the editor with ``$/cancel_request``. After a ``_hub_reset`` (the hub could not serve
  the cursor) the state that follows is cut to what the editor lacks (``unseen``).
* **Capabilities.** The hub is told the editor's client capabilities without ``fs`` and
  ``terminal``: the hub does not relay those requests, so the bridge does not claim them.

Errors the editor gets: the hub's own, and ``hub.bridge.link``'s (bad URL, refused token,
unreachable or gone hub), as JSON-RPC errors on the request that needed the hub.

Every decision is the core's (``hub.bridge.core.Relay``, without I/O); the ``Bridge`` here reads
the editor's lines and the hub's frames, hands them to the core and carries out the actions it
returns (``hub.bridge.actions``). What it keeps itself is what needs time or a socket: the
WebSocket, the tasks, waiting for the link, the reconnect loop with its backoff and window, and
the bridge's own requests to the hub (``initialize``, the resumes, ``session/list``).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from hub.bridge import actions, prompts
from hub.bridge.backoff import RECONNECT_WINDOW, Backoff, gone
from hub.bridge.core import Relay
from hub.bridge.editor import EditorChannel, EditorClosed
from hub.bridge.frames import HubError, unreachable
from hub.bridge.link import LinkFailure, Target, connect_hub
from hub.bridge.tracking import PromptWait
from hub.protocol.errors import RpcError

log = logging.getLogger("hub.bridge")


class Bridge:
    """One editor, one hub; see the module docstring. ``core`` holds the relay's state."""

    def __init__(
        self,
        editor: EditorChannel,
        target: Target,
        *,
        agent: str | None = None,
        session: str | None = None,
        reconnect_window: float = RECONNECT_WINDOW,
    ) -> None:
        self.editor = editor
        self.target = target
        self.reconnect_window = reconnect_window
        self.core = Relay(target.url, agent=agent, session=session)
        self._ws: ClientConnection | None = None
        self._calls: dict[int, anyio.Event] = {}
        self._reconnecting = False
        self._closing = False
        self._ready = anyio.Event()
        self._down: RpcError | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    # -- the main loop -----------------------------------------------------------------------

    async def run(self) -> None:
        """Relay until the editor closes stdin (or stdout)."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                try:
                    while True:
                        line = await self.editor.receive()
                        if line is None:
                            log.info("= the editor closed stdin")
                            break
                        await self._perform(self.core.from_editor(line))
                except EditorClosed:
                    log.info("= the editor closed stdout")
                finally:
                    self._closing = True
                    tg.cancel_scope.cancel()
        finally:
            ws = self._ws
            self._ws = None
            if ws is not None:
                with anyio.move_on_after(2, shield=True):
                    await ws.close()

    def _spawn(self, fn: Callable[[], Any], name: str) -> None:
        if self._tg is None:
            raise RuntimeError("the bridge is not running")
        self._tg.start_soon(fn, name=name)

    async def _perform(self, steps: list[actions.Action]) -> None:
        """Carry out the core's actions, in order."""
        for action in steps:
            if isinstance(action, actions.ToEditor):
                await self.editor.send(action.frame)
            elif isinstance(action, actions.ToHub):
                await self._to_hub(action.frame)
            elif isinstance(action, actions.OwnAnswer | actions.Reconnect):
                self._signal(action)
            elif isinstance(action, actions.Connect):
                await self._initialize(action.editor_id)
            elif isinstance(action, actions.Submit):
                try:
                    await self._wait_link()
                except LinkFailure as exc:
                    await self._perform(self.core.refuse(action.pending, exc.error))
                else:
                    await self._perform(self.core.submit(action.pending))
            elif isinstance(action, actions.Notify):
                try:
                    await self._wait_link()
                except LinkFailure as exc:
                    log.warning("! %s not sent: %s", action.method, exc.error.message)
                else:
                    await self._to_hub(action.frame)

    def _signal(self, action: actions.OwnAnswer | actions.Reconnect) -> None:
        """The actions that need no waiting: wake an own request's caller, or reconnect."""
        if isinstance(action, actions.Reconnect):
            self._start_reconnect()
            return
        done = self._calls.pop(action.pending.hub_id, None)
        if done is not None:
            done.set()

    async def _to_hub(self, frame: bytes) -> None:
        ws = self._ws
        if ws is None:
            return
        try:
            await ws.send(frame.decode())
        except ConnectionClosed:
            pass  # the reader sees the close and settles the requests sent on it

    # -- the link ----------------------------------------------------------------------------

    async def _initialize(self, editor_id: Any) -> None:
        try:
            ws = await connect_hub(self.target)
            result = await self._establish(ws)
        except LinkFailure as exc:
            log.error("! %s", exc.error.message)
            await self._perform(self.core.initialize_failed(editor_id, exc.error))
            return
        self._ready.set()
        await self._perform(self.core.initialized(editor_id, result))

    async def _establish(self, ws: ClientConnection) -> Any:
        """Start reading ``ws``, initialize on it and resume every session at its cursor."""
        self._ws = ws
        generation = self.core.linked()
        self._spawn(lambda: self._read_hub(ws, generation), "hub reader")
        try:
            result = await self._call(ws, generation, "initialize", self.core.hub_initialize())
        except LinkFailure:
            await ws.close()
            raise
        except HubError as exc:
            await ws.close()
            raise LinkFailure(exc.error, fatal=True) from None
        connection_id = self.core.connected(result)
        log.info("= connected to %s as %s", self.target.url, connection_id)
        for track, params in self.core.resumes():
            try:
                resumed = await self._call(ws, generation, "session/resume", params)
            except HubError as exc:
                await self._perform(self.core.resume_failed(track, exc.error))
            else:
                self.core.resumed(track, resumed)
        return result

    async def _call(
        self, ws: ClientConnection, generation: int, method: str, params: dict[str, Any]
    ) -> Any:
        """The bridge's own request on ``ws`` (the connection of ``generation``): its result,
        ``HubError``, or ``LinkFailure`` (at once if ``ws`` already dropped)."""
        pending, frame = self.core.own_request(method, params, generation)
        if frame is not None:
            done = self._calls[pending.hub_id] = anyio.Event()
            try:
                await ws.send(frame.decode())
            except ConnectionClosed:
                pass  # the reader sees the close and settles the request with the others
            await done.wait()
        if pending.error is not None:
            if pending.lost:
                raise LinkFailure(pending.error, fatal=False)
            raise HubError(pending.error)
        return pending.result

    async def _wait_link(self) -> None:
        """Return once the hub connection is up; ``LinkFailure`` if it cannot be had."""
        if self._down is not None and not self._reconnecting:
            # Given up earlier: try again now that the editor needs the hub.
            self._down = None
            self._ready = anyio.Event()
            self._start_reconnect()
        await self._ready.wait()
        if self._down is not None:
            raise LinkFailure(self._down, fatal=True)

    def _start_reconnect(self) -> None:
        if self._reconnecting or self._closing:
            return
        self._reconnecting = True
        self._spawn(self._reconnect, "reconnect")

    async def _reconnect(self) -> None:
        backoff = Backoff(anyio.current_time(), self.reconnect_window)
        failure = unreachable("the hub is gone", self.target.url)
        try:
            while not self._closing:
                try:
                    ws = await connect_hub(self.target)
                    await self._establish(ws)
                    await self._settle_orphans()
                    if not self.core.up:
                        # It dropped meanwhile; its Reconnect came while this one was under way.
                        lost = unreachable("the connection to the hub was lost", self.target.url)
                        raise LinkFailure(lost, fatal=False)
                except LinkFailure as exc:
                    failure = exc.error
                    delay = backoff.retry_after(anyio.current_time(), fatal=exc.fatal)
                    if delay is None:
                        break
                    log.info("= hub not reachable yet (%s); retrying", exc.error.message)
                    await anyio.sleep(delay)
                    continue
                self._ready.set()
                return
            log.error("! giving up on the hub: %s", failure.message)
            self._down = down = gone(failure)
            self._ready.set()
            await self._perform(self.core.fail_orphans(down))
        finally:
            self._reconnecting = False

    async def _settle_orphans(self) -> None:
        """Requests whose answers were lost with the old connection, in the order sent."""
        for pending in self.core.take_orphans():
            steps, ask = self.core.settle_orphan(pending)
            await self._perform(steps)
            if ask is not None:
                await self._perform(self.core.turn_ended(ask, await self._turn_over(ask)))

    async def _turn_over(self, wait: PromptWait) -> str | None:
        """The stop reason of ``wait``'s turn if it is over, else ``None``."""
        track = self.core.sessions.get(wait.session_id)
        ws, generation = self._ws, self.core.generation
        if track is None or ws is None:
            return None
        known = prompts.turn_over_known(track, wait)
        params: dict[str, Any] = {}
        while known is None:
            try:
                listed = await self._call(ws, generation, "session/list", params)
            except (HubError, LinkFailure):
                return None
            page = prompts.read_listing(listed, wait.session_id, params)
            if page.next is None:
                return page.stop_reason
            params = page.next
        return known

    # -- from the hub ------------------------------------------------------------------------

    async def _read_hub(self, ws: ClientConnection, generation: int) -> None:
        try:
            async for raw in ws:
                if isinstance(raw, str):
                    await self._perform(self.core.from_hub(raw, generation))
        except ConnectionClosed:
            pass
        except EditorClosed:
            log.info("= the editor closed stdout")
            self._closing = True
            if self._tg is not None:
                self._tg.cancel_scope.cancel()
        finally:
            code = ws.close_code
            reason = f"close code {code}" if code is not None else "connection lost"
            self._dropped(generation, reason)

    def _dropped(self, generation: int, reason: str) -> None:
        """The connection of ``generation`` ended; reconnect if it was the current one."""
        if generation != self.core.generation or self._closing:
            return
        self._ws = None
        if self._ready.is_set():
            self._ready = anyio.Event()
        for action in self.core.dropped(generation, reason):
            if isinstance(action, actions.OwnAnswer | actions.Reconnect):
                self._signal(action)


async def run_stdio(
    target: Target,
    *,
    agent: str | None = None,
    session: str | None = None,
    reconnect_window: float = RECONNECT_WINDOW,
) -> None:
    """Run one bridge on this process's stdin and stdout until the editor closes them or
    SIGINT / SIGTERM arrives (then the hub connection is closed cleanly)."""
    editor = await EditorChannel.open()
    bridge = Bridge(editor, target, agent=agent, session=session, reconnect_window=reconnect_window)
    async with anyio.create_task_group() as tg:

        async def on_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    log.info("= signal %d: closing", signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(on_signals)
        try:
            await bridge.run()
        finally:
            tg.cancel_scope.cancel()
            editor.close()
