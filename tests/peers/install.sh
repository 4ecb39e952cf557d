#!/usr/bin/env bash
# Installs the pinned third-party ACP peers the tests drive (see tests/peers/README.md).
#
#   tests/peers/install.sh PYTHON
#
# - npm ci in tests/peers (the TypeScript SDK 1.9.0 examples, SDK 2.4.0, ws, typescript for
#   tsc -p hub/web, axe-core for the accessibility checks of tests/web, and codex-acp 0.16.0,
#   whose package pulls the platform's binary, about 230 MB, as an optional dependency); skipped with a message when npm is absent (the tests
#   that need node then skip, or fail in CI);
# - the Python SDK (requirements.txt) into PYTHON's environment;
# - the Python SDK's sdist into tests/peers/cache/, with its examples/ extracted beside it.
# Idempotent: a second run with everything in place only checks and returns.
set -euo pipefail

PYTHON="${1:?usage: install.sh PYTHON}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="$HERE/cache"
PY_SDK_VERSION="0.12.1"
PY_EXAMPLES="$CACHE/agent-client-protocol-$PY_SDK_VERSION/examples"

# --- TypeScript SDK peers -------------------------------------------------------------------
if command -v npm >/dev/null 2>&1; then
    stamp="$HERE/node_modules/.package-lock.json"
    if [[ -f "$stamp" && "$stamp" -nt "$HERE/package-lock.json" ]]; then
        echo "peers: node_modules up to date"
    else
        echo "peers: npm ci"
        (cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error)
    fi
else
    echo "peers: npm not found; skipping the TypeScript SDK peers (their tests will skip)"
fi

# --- Python SDK -----------------------------------------------------------------------------
if "$PYTHON" - "$PY_SDK_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
import websockets  # the [http] extra
sys.exit(0 if version("agent-client-protocol") == sys.argv[1] else 1)
PY
then
    echo "peers: agent-client-protocol $PY_SDK_VERSION already installed"
else
    echo "peers: pip install -r requirements.txt"
    "$PYTHON" -m pip install --quiet -r "$HERE/requirements.txt"
fi

# --- Python SDK examples (only shipped in the sdist) ----------------------------------------
if [[ -f "$PY_EXAMPLES/agent.py" && -f "$PY_EXAMPLES/echo_agent.py" ]]; then
    echo "peers: Python SDK examples present"
else
    mkdir -p "$CACHE"
    sdist="$(ls "$CACHE"/agent_client_protocol-"$PY_SDK_VERSION".tar.gz 2>/dev/null || true)"
    if [[ -z "$sdist" ]]; then
        echo "peers: pip download the agent-client-protocol $PY_SDK_VERSION sdist"
        "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
            --dest "$CACHE" "agent-client-protocol==$PY_SDK_VERSION"
        sdist="$(ls "$CACHE"/agent_client_protocol-"$PY_SDK_VERSION".tar.gz)"
    fi
    "$PYTHON" - "$sdist" "$CACHE" "$PY_SDK_VERSION" <<'PY'
import sys
import tarfile
from pathlib import Path

sdist, cache, version = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
target = cache / f"agent-client-protocol-{version}" / "examples"
target.mkdir(parents=True, exist_ok=True)
with tarfile.open(sdist) as archive:
    for member in archive.getmembers():
        parts = Path(member.name).parts
        if len(parts) >= 3 and parts[1] == "examples" and member.isfile():
            source = archive.extractfile(member)
            assert source is not None
            destination = target.joinpath(*parts[2:])
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(source.read())
print(f"peers: examples extracted into {target}")
PY
fi
