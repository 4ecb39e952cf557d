#!/usr/bin/env bash
# Installs the pinned third-party ACP peers the tests drive. Filled in with the peers.
set -euo pipefail
exit 0
