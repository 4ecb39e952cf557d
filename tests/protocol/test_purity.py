"""hub.protocol must stay free of I/O libraries."""

from __future__ import annotations

import ast
from pathlib import Path

FORBIDDEN = {"anyio", "starlette", "websockets", "redis", "uvicorn", "asyncio", "socket"}
PROTOCOL = Path(__file__).resolve().parents[2] / "hub" / "protocol"


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_protocol_package_imports_no_io_library() -> None:
    files = sorted(PROTOCOL.glob("*.py"))
    assert files, "hub/protocol has no modules"
    offenders = {f.name: sorted(imported_roots(f) & FORBIDDEN) for f in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_itself_detects_an_io_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import anyio\nfrom starlette.websockets import WebSocket\n")
    assert imported_roots(bad) & FORBIDDEN == {"anyio", "starlette"}
