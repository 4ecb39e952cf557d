"""The multi-node deployment files: ``docker-compose.yml`` (Redis, two hub nodes, a proxy
without stickiness) and ``deploy/k8s`` (rendered by ``kubectl kustomize``), checked as their
tools read them, and their hub configuration loaded as the hub loads it."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

from hub.agents.spec import load_config
from hub.settings import Settings
from tests.support import ROOT, require_binary

DEPLOY = ROOT / "deploy"


def _hub_settings(path: Path) -> Settings:
    """The settings a hub started with the config file ``path`` runs with."""
    config = load_config(path)
    assert config.agents, path
    return Settings().merged(dict(config.hub))


def _documents(text: str) -> list[str]:
    return [d for d in re.split(r"^---$", text, flags=re.M) if d.strip()]


def _kind(doc: str) -> str:
    match = re.search(r"^kind: (\w+)$", doc, re.M)
    assert match is not None, doc
    return match.group(1)


def _name(doc: str) -> str:
    match = re.search(r"^  name: ([\w-]+)$", doc, re.M)
    assert match is not None, doc
    return match.group(1)


def test_kustomize_renders_the_cluster(tmp_path: Path) -> None:
    kubectl = require_binary("kubectl")
    done = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "k8s")],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    docs = _documents(done.stdout.decode())
    # Labelled in each file, not by kustomize's `labels` field, which Debian's kubectl
    # (kubernetes-client 1.20, the one `.ci/run` installs) does not know.
    assert all("\n    app.kubernetes.io/part-of: acp-hub\n" in d for d in docs), docs
    found = {(_kind(d), _name(d)): d for d in docs}
    assert set(found) == {
        ("ConfigMap", "acp-hub-config"),
        ("Secret", "acp-hub-key"),
        ("Deployment", "acp-hub"),
        ("Service", "acp-hub"),
        ("Deployment", "acp-hub-redis"),
        ("Service", "acp-hub-redis"),
    }
    hub = found[("Deployment", "acp-hub")]
    replicas = re.search(r"^  replicas: (\d+)$", hub, re.M)
    assert replicas is not None
    assert int(replicas.group(1)) >= 2
    assert re.search(
        r"livenessProbe:\n\s+failureThreshold: \d+\n\s+httpGet:\n\s+path: /healthz", hub
    )
    assert re.search(
        r"readinessProbe:\n\s+failureThreshold: \d+\n\s+httpGet:\n\s+path: /readyz", hub
    )
    assert "value: redis://acp-hub-redis:6379/0" in hub
    assert "secretName: acp-hub-key" in hub
    assert "sessionAffinity" not in found[("Service", "acp-hub")]
    # The ConfigMap's file is a config the hub accepts.
    config = found[("ConfigMap", "acp-hub-config")]
    block = config.split("acp-hub.toml: |\n", 1)[1].split("\nkind:", 1)[0]
    path = tmp_path / "acp-hub.toml"
    path.write_text(textwrap.dedent(block))
    settings = _hub_settings(path)
    assert settings.host == "0.0.0.0"


def test_compose_runs_two_nodes_on_one_redis_behind_a_proxy() -> None:
    compose = (ROOT / "docker-compose.yml").read_text()
    services = set(re.findall(r"^  ([\w-]+):$", compose, re.M))
    assert {"redis", "hub-a", "hub-b", "proxy"} <= services
    assert compose.count("ACP_HUB_STORE: redis://redis:6379/0") == 2
    assert "--appendonly" in compose
    for mounted in re.findall(r"\./(deploy/[\w/.-]+):", compose):
        if not mounted.endswith("signing-key"):  # created by the operator (see the file)
            assert (ROOT / mounted).is_file(), mounted
    assert "acp-hub-key" in compose
    nginx = (DEPLOY / "cluster" / "nginx.conf").read_text()
    assert re.search(r"server hub-a:8765;\s+server hub-b:8765;", nginx)
    assert "ip_hash" not in nginx  # no stickiness
    assert "sticky" not in nginx
    assert "proxy_set_header Upgrade $http_upgrade;" in nginx
    settings = _hub_settings(DEPLOY / "cluster" / "acp-hub.toml")
    assert settings.host == "0.0.0.0"
