"""The files of ``deploy/``, read as their tools would read them: no Docker daemon or Grafana
runs here, so what can go wrong in them without one is checked from the files themselves."""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from hub.server.app import create_app
from hub.settings import Settings
from tests.server.harness import scripted_agent
from tests.support import ROOT

DEPLOY = ROOT / "deploy"


def _text() -> str:
    """A new hub's ``/metrics``."""
    _, hub = create_app(Settings(), {"a": scripted_agent("a")})
    return hub.metrics.render().decode()


def _exported_names() -> set[str]:
    """Every sample name a hub's ``/metrics`` can show (histogram ``_bucket`` included)."""
    text = _text()
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    # Series with labels only appear once something happened; their families are declared.
    names |= set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    return names | {m + "_bucket" for m in re.findall(r"^# TYPE (\S+) histogram$", text, re.M)}


def _expressions(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for value in node.values() for e in _expressions(value)]
    if isinstance(node, list):
        return [e for value in node for e in _expressions(value)]
    return []


def test_the_dashboard_graphs_only_series_the_hub_exports() -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    expressions = _expressions(dashboard["panels"])
    assert len(expressions) >= 15
    used = {n for e in expressions for n in re.findall(r"\b((?:acp_hub|process)_\w+)\{", e)}
    exported = _exported_names()
    assert used - exported == set()
    # Every family of the hub's own has a place on the dashboard.
    families = {
        re.sub(r"_total$", "", name)
        for name in re.findall(r"^# TYPE (acp_hub_\w+) ", _text(), re.M)
        if not name.endswith("_created")
    }
    shown = {re.sub(r"_(total|bucket)$", "", n) for n in used}
    assert families - shown - {"acp_hub_build_info", "acp_hub_build"} == set()
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def _dockerignore_allows(path: str) -> bool:
    allowed = False
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        top = path.split("/")[0]
        if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(top, pattern):
            allowed = negate
    return allowed


def test_the_dockerfile_copies_what_exists_and_runs_unprivileged() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [line.strip() for line in re.sub(r"\\\n", " ", text).splitlines()]
    copies = [
        line.split()[1:-1] for line in lines if line.startswith("COPY ") and "--from" not in line
    ]
    sources = [source for sources in copies for source in sources]
    assert "hub" in sources
    for source in sources:
        assert (ROOT / source).exists(), source
        assert _dockerignore_allows(source), f"{source} is excluded by .dockerignore"
    assert (ROOT / "hub" / "web" / "index.html").exists()  # package data the wheel carries
    stages = [line for line in lines if line.startswith("FROM ")]
    assert len(stages) == 2, "a build stage and a final stage"
    final = text[text.rindex("FROM ") :]
    user = re.search(r"^USER (\S+)", final, re.M)
    assert user is not None
    assert not user.group(1).startswith(("root", "0"))
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", final, re.M)
    assert "COPY hub" not in final, "the final stage installs the wheel, not the sources"
