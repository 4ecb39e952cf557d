"""Where the installed third-party ACP peers live (installed by ``tests/peers/install.sh``).

Each helper returns the path of one peer, or skips (fails in CI) through ``missing`` when
``make peers`` has not installed it. The TypeScript peers still need ``node``
(``require_binary("node")``); the Python examples run with ``sys.executable``.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import missing

PEERS = Path(__file__).resolve().parent
NODE_MODULES = PEERS / "node_modules"
TS_SDK_V1 = NODE_MODULES / "acp-sdk-v1"  # npm alias of @agentclientprotocol/sdk@1.9.0
TS_SDK_V2 = NODE_MODULES / "acp-sdk-v2"  # npm alias of @agentclientprotocol/sdk@2.4.0
PY_SDK_VERSION = "0.12.1"
PY_EXAMPLES = PEERS / "cache" / f"agent-client-protocol-{PY_SDK_VERSION}" / "examples"

_INSTALL_HINT = "run `make peers` (tests/peers/install.sh)"


AXE = NODE_MODULES / "axe-core" / "axe.min.js"  # axe-core 4.14.1, for tests/web


def _present(path: Path, what: str) -> Path:
    if not path.exists():
        missing(f"{what} is not installed at {path}: {_INSTALL_HINT}")
    return path


def ts_agent_js() -> Path:
    """The TypeScript SDK 1.9.0 example agent (v1; tool calls, permission, cancel)."""
    return _present(TS_SDK_V1 / "dist" / "examples" / "agent.js", "the TypeScript SDK agent")


def ts_dual_agent_js() -> Path:
    """The TypeScript SDK 1.9.0 dual-version example agent (v1 and v2)."""
    return _present(
        TS_SDK_V1 / "dist" / "examples" / "dual-version-agent.js",
        "the TypeScript SDK dual-version agent",
    )


def ts_ws_client_js() -> Path:
    """The TypeScript SDK 1.9.0 example WebSocket client (v1; ``ACP_WS_URL`` names the server)."""
    return _present(TS_SDK_V1 / "dist" / "examples" / "ws-client.js", "the TypeScript ws client")


def ts_http_server_js() -> Path:
    """The TypeScript SDK 1.9.0 reference HTTP/WebSocket ACP server example (``/acp``)."""
    return _present(
        TS_SDK_V1 / "dist" / "examples" / "http-server.js", "the TypeScript HTTP server"
    )


def ts_ws_client_module_dir() -> Path:
    """The directory to run node scripts from so that they can import the SDK 2.4.0 client.

    Scripts placed or run here resolve ``acp-sdk-v2/experimental/ws-client`` (the
    ``createWebSocketStream`` transport), ``acp-sdk-v2/experimental/v2`` (the v2 client API),
    ``acp-sdk-v2`` (the v1 client API) and ``ws``; see tests/peers/README.md.
    """
    _present(
        TS_SDK_V2 / "dist" / "transports" / "ws-stream.js", "the TypeScript SDK 2.4.0 ws-client"
    )
    _present(NODE_MODULES / "ws" / "package.json", "the ws package")
    return PEERS


def ts_ws_client_driver() -> Path:
    """``ws_client.mjs``: one scripted run of the SDK 2.4.0 WebSocket client (see README)."""
    ts_ws_client_module_dir()
    return _present(PEERS / "ws_client.mjs", "the ws client driver")


def codex_acp() -> Path:
    """The platform binary of ``@zed-industries/codex-acp`` 0.16.0 (v1; requires login).

    npm installs only the optional dependency of the running platform; the binary is run
    directly (the package's ``bin/codex-acp.js`` only looks it up and spawns it).
    """
    package = NODE_MODULES / "@zed-industries"
    found = sorted(package.glob("codex-acp-*/bin/codex-acp"))
    if not found:
        missing(f"codex-acp is not installed under {package}: {_INSTALL_HINT}")
    return found[0]


def py_example_agent() -> Path:
    """The Python SDK 0.12.1 ``examples/agent.py`` (v1; message chunks only)."""
    return _present(PY_EXAMPLES / "agent.py", "the Python SDK example agent")


def py_echo_agent() -> Path:
    """The Python SDK 0.12.1 ``examples/echo_agent.py`` (echoes whatever version it is offered)."""
    return _present(PY_EXAMPLES / "echo_agent.py", "the Python SDK echo agent")


def axe_script() -> Path:
    """axe-core's browser bundle (evaluated in pages by the accessibility tests)."""
    return _present(AXE, "axe-core")
