"""The web server ``acp-hub serve`` and ``acp-hub demo`` run: uvicorn's, on sockets bound
beforehand, with the hub's banner and shutdown.

Once the server listens, it prints ``acp-hub: listening on http://HOST:PORT`` (with the real
port when ``--port 0``) on standard output. Unless ``auth = "none"``, it then prints
``acp-hub: owner URL: URL``, a link carrying an owner token in its fragment, also written to
this hub's ``owner-url-PORT`` (0600) in the state directory (``hub.access.owner_url``; removed
at a clean shutdown), then where that file is and how to stop: one banner. SIGINT and SIGTERM
shut down cleanly: clients are closed with 1001, agents are stopped (stdin closed, SIGTERM,
SIGKILL of their process groups), the store writes what it holds.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from hub.access import owner_url
from hub.server.app import HubApp
from hub.server.close_codes import GOING_AWAY
from hub.settings import Settings

log = logging.getLogger("hub")

GC_THRESHOLDS = (700, 10, 100)
"""The garbage collector's thresholds for a serving hub: Python's defaults but the third,
100 instead of 10 (see ``tune_gc``)."""


def tune_gc() -> None:
    """Shape the garbage collector for a server that holds thousands of connections.

    A full collection walks every tracked object and pauses every client meanwhile: about a
    quarter of a second with a thousand connections on the benchmark machine
    (``docs/design/fanout.md``). Two things make them rarer and shorter:

    - what start-up made (modules, classes, functions, the settings: tens of thousands of
      objects that live as long as the process) is moved out of the collector's generations
      (``gc.freeze``), so that a full collection walks only what serving made;
    - a full collection waits for 100 collections of the middle generation instead of 10
      (``GC_THRESHOLDS``). Python also waits until the objects that survived into the oldest
      generation grew by a quarter; with the default, a burst of connections met that
      condition several times over, and each time paused the hub in the middle of streaming.
      Young garbage is still collected as often as before; cycles that lived long (a closed
      connection's) are freed at the next full collection, which under load still comes
      every few seconds.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class Server(uvicorn.Server):
    """uvicorn's server, announcing its address and closing clients with 1001 on shutdown."""

    def __init__(self, config: uvicorn.Config, hub: HubApp, banner: str) -> None:
        super().__init__(config)
        self.hub = hub
        self.banner = banner
        self.owner_url: str | None = None
        self.owner_url_file: Path | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        host, port = self.config.host, self.config.port
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                break
        shown = f"[{host}]" if ":" in str(host) else str(host)
        base = f"http://{shown}:{port}"
        lines = [f"listening on {base}"]
        gate = self.hub.gate
        if gate.enabled:
            page = f"{_public_base(self.hub.settings, base)}/#token={gate.mint_owner_token()}"
            self.owner_url = page
            try:
                self.owner_url_file = gate.write_owner_url(page, int(port))
            except OSError as exc:
                log.warning("! cannot write the owner URL file: %s", exc.strerror or exc)
            lines.append(f"owner URL: {page}")
            lines.append(f"  open it in a browser to use the hub as its owner{self.banner}")
            if self.owner_url_file is not None:
                again = f"acp-hub url --port {port}"
                lines.append(
                    f"  it is also in {self.owner_url_file} (readable by you only); "
                    f"`{again}` prints it again"
                )
        else:
            lines.append(f"  open {base}/ in a browser{self.banner}")
        lines.append("  stop with Ctrl+C (SIGINT) or SIGTERM")
        print("\n".join(f"acp-hub: {line}" for line in lines), flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.hub.close_connections(GOING_AWAY, "the hub is shutting down")
        await super().shutdown(sockets)
        if self.owner_url_file is not None and self.owner_url is not None:
            owner_url.remove(self.owner_url_file, self.owner_url)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM ask for the graceful shutdown, and that is all they do.

        uvicorn's own version raises the captured signal again once the server is down, which
        ends a clean shutdown with a KeyboardInterrupt traceback or death by SIGTERM instead
        of exit status 0.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class BindError(Exception):
    """The hub cannot listen where it was told; the message is the one line to print."""


def listen(host: str, port: int) -> list[socket.socket]:
    """Bound sockets for ``host``:``port``, one per address the name resolves to, as asyncio's
    ``create_server`` binds them (``SO_REUSEADDR``, IPv6 sockets IPv6 only); uvicorn listens on
    them. ``BindError`` says why not: a port in use names the port and the option to change."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise BindError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise BindError(
                        f"port {port} is in use: pass --port (another port, or 0 for any free one)"
                    ) from None
                raise BindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _public_base(settings: Settings, base: str) -> str:
    """Where users reach the hub: ``public_url``, else the bound address, else (a wildcard
    bind) the first plain name of ``allowed_hosts``."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    if settings.host in ("0.0.0.0", "::", ""):
        names = [h for h in settings.allowed_hosts if "*" not in h]
        if names:
            port = base.rsplit(":", 1)[1]
            return f"http://{names[0]}:{port}"
    return base
