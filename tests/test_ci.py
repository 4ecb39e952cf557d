"""``.ci/run`` on a fresh machine: it installs every binary a test requires, says which versions
it used, runs the suite with the Hypothesis CI profile, and keeps the duration report."""

from __future__ import annotations

import re
import subprocess

from tests.support import ROOT, hypothesis_profile

CI_RUN = ROOT / ".ci" / "run"


def _script() -> str:
    return CI_RUN.read_text()


def _exports() -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(\S+)$", _script(), re.M))


def _required_binaries() -> set[str]:
    """Every binary a test asks ``require_binary`` for (``tests/support.py``)."""
    found: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if "node_modules" not in path.parts:
            found.update(re.findall(r"require_binary\(\"([\w.-]+)\"\)", path.read_text()))
    return found


def test_the_script_is_valid_bash() -> None:
    done = subprocess.run(["bash", "-n", str(CI_RUN)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_every_required_binary_is_installed_when_missing() -> None:
    packages = dict(re.findall(r"^\s+\[([\w.-]+)\]=([\w.-]+)$", _script(), re.M))
    required = _required_binaries()
    assert {"node", "chromium", "kubectl", "redis-server"} <= required
    # npm is what `make peers` installs the test peers with (tests/peers/install.sh).
    assert set(packages) == {*required, "npm"}
    assert packages["kubectl"] == "kubernetes-client"  # Debian's kubectl


def test_the_versions_used_are_printed() -> None:
    script = _script()
    for command in (
        "node --version",
        "npm --version",
        "redis-server --version",
        "chromium --version",
        "kubectl version --client",
    ):
        assert f"$({command}" in script, command


def test_the_tests_run_with_every_binary_required_and_the_ci_profile() -> None:
    exports = _exports()
    assert exports["ACP_HUB_REQUIRE_ALL"] == "1"
    assert hypothesis_profile(exports) == "ci"


def test_the_hypothesis_profile_follows_the_environment() -> None:
    assert hypothesis_profile({}) == "dev"
    assert hypothesis_profile({"CI": "true"}) == "ci"
    assert hypothesis_profile({"HYPOTHESIS_PROFILE": "dev", "CI": "true"}) == "dev"


def test_the_suite_runs_in_parallel_and_reports_its_slowest_tests() -> None:
    makefile = (ROOT / "Makefile").read_text()
    unit = makefile.split("\nunit:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"^JOBS +\?= +[1-9]\d*$", makefile, re.M), makefile
    assert "-n $(JOBS)" in unit, unit
    assert "--durations=25" in makefile, unit
    assert "make test" in _script()
