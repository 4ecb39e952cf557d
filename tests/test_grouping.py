"""The test suite's worker groups (``tests/conftest.py``): the files that share an expensive
fixture map to one ``xdist_group`` each, and the installed pytest and pytest-xdist honour the
mark under ``--dist loadgroup``, as ``make unit`` runs them (pytest 9.2 with pytest-xdist 3.8
silently did not: every test of a group went to a worker of its own)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import xdist_group_of
from tests.support import ROOT

GROUPED = """
import pytest

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i: int) -> None:
    pass

@pytest.mark.parametrize("i", range(6))
def test_free(i: int) -> None:
    pass
"""


def test_the_files_sharing_a_fixture_have_a_group_each() -> None:
    assert xdist_group_of("tests/test_package.py") == "package"
    browser = sorted(
        path.relative_to(ROOT).as_posix() for path in (ROOT / "tests" / "web").glob("test_*.py")
    )
    assert browser, "no browser test files found"
    groups = {xdist_group_of(where) for where in browser}
    assert None not in groups
    assert len(groups) == len(browser)  # one group per file
    assert xdist_group_of("tests/test_cli.py") is None
    assert xdist_group_of("tests/agents/test_connection.py") is None


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_groups.py").write_text(GROUPED)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    grouped = set(re.findall(r"\[(gw\d+)\] \[\s*\d+%\] PASSED \S+::test_grouped\[", done.stdout))
    assert grouped, done.stdout
    assert len(grouped) == 1, f"the group ran on {grouped}"
    # The group's tests carry its name, as pytest-xdist's scheduler reads it.
    assert len(set(re.findall(r"test_grouped\[\d\]@shared", done.stdout))) == 6, done.stdout
