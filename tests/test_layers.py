"""The package's layers only point down: protocol < agents < sessions < server < cli.

Every module's imports are read statically (including imports inside functions and under
``TYPE_CHECKING``): a module may import the hub's modules of its own layer or of a lower one,
and the third-party libraries its layer may use. A subprocess then imports the sessions layer
for real and checks that it did not load the server's libraries.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HUB = ROOT / "hub"

LAYERS: dict[str, int] = {
    # the package itself (its version) and the settings are plain values every layer reads
    "hub": 0,
    "hub.settings": 0,
    "hub.access.hosts": 0,  # what a loopback address is, which the settings check
    "hub.protocol": 1,  # sans-I/O
    "hub.agents": 2,
    "hub.demo": 2,  # an agent of its own: it speaks the protocol, nothing else of the hub
    "hub.store": 2,  # what sessions keep, below the sessions that use it
    "hub.access": 2,  # credentials, links and the audit trail: sessions record, server admits
    "hub.sessions": 3,
    "hub.server": 4,
    "hub.cli": 5,
    "hub.bridge": 5,  # a command of its own: a client of the hub, over the protocol layer only
}

BRIDGE_MAY_IMPORT = ("hub", "hub.protocol", "hub.bridge")
"""The hub's modules the bridge may use: it is a hub client, so it does not reach into the
agents, sessions or server layers even though it sits beside the command line."""

SERVER_LIBRARIES = {"starlette", "uvicorn", "websockets"}
IO_LIBRARIES = {"anyio", "asyncio", "socket", "redis", *SERVER_LIBRARIES}
FORBIDDEN_LIBRARIES: dict[str, set[str]] = {
    "hub": IO_LIBRARIES,
    "hub.settings": IO_LIBRARIES,
    "hub.access.hosts": IO_LIBRARIES,
    "hub.protocol": IO_LIBRARIES,
    "hub.agents": SERVER_LIBRARIES,
    "hub.demo": SERVER_LIBRARIES,
    "hub.store": SERVER_LIBRARIES,
    "hub.access": IO_LIBRARIES,
    "hub.sessions": SERVER_LIBRARIES,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    """The longest entry of ``LAYERS`` that ``module`` is or lies under."""
    best = ""
    for layer in LAYERS:
        if (module == layer or module.startswith(layer + ".")) and len(layer) > len(best):
            best = layer
    if not best:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best


def imports_of(path: Path, module: str) -> set[str]:
    """Every module ``path`` (the module ``module``) imports, absolute (relative imports
    resolved), and every ``module.name`` of a ``from module import name``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            # `from hub.sessions import arbiter` imports the module hub.sessions.arbiter
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def is_module(name: str) -> bool:
    path = ROOT / name.replace(".", "/")
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def violations(path: Path, module: str | None = None) -> list[str]:
    """The imports of ``path`` that point up a layer or use a library its layer may not."""
    module = module or module_name(path)
    own = layer_of(module)
    bad: set[str] = set()
    for imported in imports_of(path, module):
        root = imported.split(".")[0]
        if root == "hub":
            target = imported
            while not is_module(target) and "." in target:
                target = target.rsplit(".", 1)[0]  # `from hub.x import name`: hub.x
            if LAYERS[layer_of(target)] > LAYERS[own]:
                bad.add(f"{target} ({layer_of(target)} is above {own})")
        elif root in FORBIDDEN_LIBRARIES.get(own, set()):
            bad.add(f"{imported} (a library {own} may not use)")
    return sorted(bad)


def test_every_module_imports_only_its_own_layer_or_lower() -> None:
    files = sorted(HUB.rglob("*.py"))
    assert len(files) > 20
    found = {module_name(f): violations(f) for f in files}
    assert {m: v for m, v in found.items() if v} == {}


def test_every_layer_names_a_module_that_exists() -> None:
    # A stale entry (a module moved or removed) would silently place nothing in its layer.
    named = {*LAYERS, *FORBIDDEN_LIBRARIES, *BRIDGE_MAY_IMPORT}
    assert sorted(name for name in named if not is_module(name)) == []


def test_the_bridge_uses_only_the_protocol_layer() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted((HUB / "bridge").glob("*.py")):
        module = module_name(path)
        for imported in imports_of(path, module):
            if imported.split(".")[0] != "hub":
                continue
            target = imported
            while not is_module(target) and "." in target:
                target = target.rsplit(".", 1)[0]
            if layer_of(target) not in BRIDGE_MAY_IMPORT and target != "hub":
                found.setdefault(module, []).append(target)
    assert len(list((HUB / "bridge").glob("*.py"))) >= 3
    assert found == {}


def test_access_imports_nothing_of_the_store() -> None:
    """``hub.access`` and ``hub.store`` share a layer; the store keeps share links and the audit
    trail in access's records (``hub.store.links``, ``hub.store.audit``), never the reverse:
    access decides without I/O, and a store is wired into the gate from above."""
    found = {
        module_name(path): sorted(
            i for i in imports_of(path, module_name(path)) if i.startswith("hub.store")
        )
        for path in sorted((HUB / "access").glob("*.py"))
    }
    assert {m: v for m, v in found.items() if v} == {}
    assert any(
        i.startswith("hub.access")
        for i in imports_of(HUB / "store" / "links.py", "hub.store.links")
    )


def test_the_check_catches_an_upward_import_and_a_server_library(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\n"
        "import websockets\n"
        "from hub.sessions import arbiter\n"
        "from hub.protocol.errors import RpcError\n"
        "if TYPE_CHECKING:\n"
        "    from hub.server.outbox import Outbox\n"
        "def f() -> None:\n"
        "    from hub import cli\n"
    )
    assert violations(bad, "hub.sessions.probe") == [
        "hub.cli (hub.cli is above hub.sessions)",
        "hub.server.outbox (hub.server is above hub.sessions)",
        "websockets (a library hub.sessions may not use)",
    ]


@pytest.mark.parametrize("package", ["hub.protocol", "hub.agents", "hub.sessions"])
def test_importing_a_lower_layer_loads_no_server_library(package: str) -> None:
    modules = sorted(module_name(f) for f in (HUB / package.split(".")[1]).glob("*.py"))
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "loaded = {name.split('.')[0] for name in sys.modules}\n"
        f"print(sorted(loaded & {SERVER_LIBRARIES!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def import_cycles(package: str) -> list[list[str]]:
    """The import cycles among the modules of ``package``, read statically (imports under
    ``TYPE_CHECKING`` and inside functions count): each as the modules around it."""
    root = HUB.parent / package.replace(".", "/")
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = module_name(path)
        edges = set()
        for imported in imports_of(path, module):
            target = imported
            while not is_module(target) and "." in target:
                target = target.rsplit(".", 1)[0]
            if target.startswith(package + ".") and target != module:
                edges.add(target)
        graph[module] = edges
    cycles: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycles.append(path[path.index(module) :])
            return
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return cycles


def test_the_server_has_no_import_cycle() -> None:
    """The server's parts depend on narrow protocols (``hub.server.methods.caller.Caller``,
    ``hub.server.watch.Subscriber``, ``hub.server.metrics.MeasuredHub``), not on the classes
    that own them: no cycle, not even under ``TYPE_CHECKING``."""
    assert import_cycles("hub.server") == []


def test_the_cycle_check_finds_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "hub" / "probe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from hub.probe.b import B\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from hub.probe import a\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "HUB", tmp_path / "hub")
    assert import_cycles("hub.probe") == [["hub.probe.a", "hub.probe.b"]]


def test_the_sessions_layer_has_no_import_cycle() -> None:
    """A session's parts depend on narrow protocols (``hub.sessions.host``,
    ``hub.sessions.ops``, ``hub.sessions.nodes``), never on the class that composes them."""
    assert import_cycles("hub.sessions") == []


def test_no_package_of_the_hub_has_an_import_cycle() -> None:
    """Across the whole of ``hub`` (bridge, cli, store, agents, access, protocol too): no
    module imports another that imports it back, not even under ``TYPE_CHECKING``."""
    assert import_cycles("hub") == []
