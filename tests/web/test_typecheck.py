"""The browser code type-checks: ``tsc -p hub/web`` (``hub/web/tsconfig.json``: checkJs, strict).

The modules in ``web/`` are plain ES modules with JSDoc types and no build step; the
TypeScript compiler pinned in ``tests/peers/package.json`` checks them without emitting.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.peers.paths import NODE_MODULES
from tests.support import ROOT, missing, require_binary

WEB = ROOT / "hub" / "web"
TSC = NODE_MODULES / "typescript" / "bin" / "tsc"


def _tsc(project: Path) -> subprocess.CompletedProcess[str]:
    node = require_binary("node")
    if not TSC.exists():
        missing(f"the TypeScript compiler is not installed at {TSC}: run `make peers`")
    return subprocess.run(
        [node, str(TSC), "-p", str(project), "--pretty", "false"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )


def test_web_code_type_checks() -> None:
    result = _tsc(WEB)
    assert result.returncode == 0, f"tsc -p hub/web found errors:\n{result.stdout}{result.stderr}"


def test_the_check_catches_a_type_error(tmp_path: Path) -> None:
    """The same configuration on a copy with one wrong type injected reports exactly it."""
    shutil.copy(WEB / "tsconfig.json", tmp_path / "tsconfig.json")
    static = tmp_path / "static"
    static.mkdir()
    source = (WEB / "static" / "ansi.js").read_text()
    # renderAnsi is documented to take a string; hand it a number.
    source += "\nexport const wrong = renderAnsi(42);\n"
    (static / "ansi.js").write_text(source)
    result = _tsc(tmp_path)
    assert result.returncode != 0, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if "error TS" in line]
    assert len(errors) == 1, result.stdout
    assert "ansi.js" in errors[0]
    assert "TS2345" in errors[0], errors[0]  # argument not assignable to parameter
    assert "'number'" in errors[0], errors[0]
    assert "'string'" in errors[0], errors[0]
