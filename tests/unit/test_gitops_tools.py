"""The GitOps tools of the tests do their job for real: helm v4.3.1, a health.lua run as Argo CD runs
it (argocd-lua) and kstatus' status.Compute. The binaries come from `make gitops-tools` (which
`make test` runs first); without them these tests fail with that command, they are never skipped.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gitops import build
from tests.gitops.tools import (
    KStatus,
    NoHealthError,
    ToolFailedError,
    ToolNotBuiltError,
    argocd_health,
    helm3_binary,
    helm_binary,
    kstatus,
)

RUNNING_SCRIPT = """\
hs = {}
if obj.status ~= nil and obj.status.phase == "Running" then
  hs.status = "Healthy"
  hs.message = obj.metadata.name .. " is running"
  return hs
end
hs.status = "Progressing"
hs.message = "phase " .. tostring(obj.status and obj.status.phase)
return hs
"""


def pod(name: str, phase: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "status": {"phase": phase}}


def lua(tmp_path: Path, text: str, name: str = "health.lua") -> Path:
    script = tmp_path / name
    script.write_text(text)
    return script


def run_helm(tmp_path: Path, *args: str) -> str:
    # Helm's own directories under the test's, so nothing is read from or written to ~.
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(tmp_path / "cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "config"),
        "HELM_DATA_HOME": str(tmp_path / "data"),
    }
    result = subprocess.run(
        [str(helm_binary()), *args], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout


# helm


def test_helm_version_is_the_pinned_release(tmp_path: Path) -> None:
    pinned = build.TOOLS[build.HELM].module_version()
    assert pinned == "v4.3.1"
    assert run_helm(tmp_path, "version", "--template", "{{.Version}}") == "v4.3.1"
    assert 'Version:"v4.3.1"' in run_helm(tmp_path, "version")


def test_helm_3_is_the_pinned_release_and_assumes_its_client_go_kubernetes(tmp_path: Path) -> None:
    assert build.TOOLS[build.HELM3].module_version() == "v3.22.0"
    env = {**os.environ, "HELM_CACHE_HOME": str(tmp_path / "c"), "HELM_CONFIG_HOME": str(tmp_path / "f")}
    helm3 = str(helm3_binary())
    version = subprocess.run(
        [helm3, "version", "--template", "{{.Version}}"], env=env, capture_output=True, text=True
    )
    assert version.stdout == "v3.22.0"
    # Stamped as helm's Makefile does: templates see the Kubernetes of its client-go, not 1.20.
    chart = tmp_path / "kube"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: kube\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\n"
        "data: {v: {{ .Capabilities.KubeVersion.Minor | quote }}}\n"
    )
    template_args = [helm3, "template", "x", str(chart)]
    rendered = subprocess.run(template_args, env=env, capture_output=True, text=True, check=False)
    assert 'v: "37"' in rendered.stdout, rendered.stderr


def test_helm_renders_a_chart(tmp_path: Path) -> None:
    chart = tmp_path / "demo"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("greeting: hello\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
    )
    out = run_helm(tmp_path, "template", "rel", str(chart), "--set", "greeting=hi")
    assert "name: rel-cm" in out
    assert 'greeting: "hi"' in out


# argocd-lua


def test_argocd_health_follows_the_object(tmp_path: Path) -> None:
    script = lua(tmp_path, RUNNING_SCRIPT)
    running = argocd_health(script, pod("web", "Running"))
    assert running == {"status": "Healthy", "message": "web is running"}
    pending = argocd_health(script, pod("web", "Pending"))
    assert pending == {"status": "Progressing", "message": "phase Pending"}


def test_argocd_health_converts_the_object_as_argo_cd_does(tmp_path: Path) -> None:
    # Numbers are Lua numbers, arrays are 1-based sequences, null is nil.
    script = lua(
        tmp_path,
        """\
local names = {}
for i, c in ipairs(obj.status.conditions) do names[i] = c.type end
local ok = obj.spec.replicas == 3 and obj.spec.ratio == 0.5 and obj.spec.gone == nil
  and #obj.status.conditions == 2 and obj.spec.enabled == true
return {status = ok and "Healthy" or "Degraded", message = table.concat(names, ",")}
""",
    )
    obj = {
        "spec": {"replicas": 3, "ratio": 0.5, "gone": None, "enabled": True},
        "status": {"conditions": [{"type": "Ready"}, {"type": "Synced"}]},
    }
    assert argocd_health(script, obj) == {"status": "Healthy", "message": "Ready,Synced"}


def test_argocd_health_script_error_exits_non_zero(tmp_path: Path) -> None:
    with pytest.raises(ToolFailedError) as raised:
        argocd_health(lua(tmp_path, 'error("no verdict for " .. obj.kind)'), pod("web", "Running"))
    assert raised.value.returncode == 1
    assert "no verdict for Pod" in raised.value.stderr
    # Argo CD drops the Lua stack trace from run errors.
    assert "stack traceback" not in raised.value.stderr

    with pytest.raises(ToolFailedError, match="attempt to index"):
        argocd_health(lua(tmp_path, "return obj.spec.missing.field", "index.lua"), pod("web", "Running"))
    with pytest.raises(ToolFailedError, match="expect table output from Lua script, not string"):
        argocd_health(lua(tmp_path, 'return "Healthy"', "string.lua"), pod("web", "Running"))


def test_argocd_health_results_argo_cd_rewrites(tmp_path: Path) -> None:
    invalid = lua(tmp_path, 'return {status = "Running", message = "up"}', "invalid.lua")
    unknown = argocd_health(invalid, {})
    assert unknown == {"status": "Unknown", "message": "Lua returned an invalid health status"}
    # An empty table encodes as a JSON array: an empty HealthStatus.
    assert argocd_health(lua(tmp_path, "return {}", "empty.lua"), {}) == {"status": "", "message": ""}
    with pytest.raises(NoHealthError):
        argocd_health(lua(tmp_path, "local x = 1", "nil.lua"), {})


def test_argocd_health_libraries_are_argo_cds(tmp_path: Path) -> None:
    # An argocd-cm customization gets package, base, table and the safe os (through require only):
    # no string or math unless useOpenLibs, which open_libs=True stands for.
    uses_string = lua(tmp_path, 'return {status = "Healthy", message = string.upper(obj.kind)}', "s.lua")
    with pytest.raises(ToolFailedError):
        argocd_health(uses_string, pod("web", "Running"))
    assert argocd_health(uses_string, pod("web", "Running"), open_libs=True)["message"] == "POD"
    uses_math = lua(tmp_path, 'return {status = "Healthy", message = tostring(math.max(1, 2))}', "m.lua")
    assert argocd_health(uses_math, {}, open_libs=True)["message"] == "2"
    safe_os = lua(
        tmp_path,
        'local os = require("os")\n'
        'return {status = "Healthy", message = tostring(os.time() > 0) .. " " .. tostring(os.exit)}',
        "os.lua",
    )
    assert argocd_health(safe_os, {})["message"] == "true nil"


def test_argocd_health_times_out_after_a_second(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(ToolFailedError, match="context deadline exceeded"):
        argocd_health(lua(tmp_path, "while true do end"), {})
    assert time.monotonic() - started < 10


# kstatus


def deployment(observed_generation: int, ready: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "generation": 2},
        "spec": {"replicas": 3, "progressDeadlineSeconds": 600},
        "status": {
            "observedGeneration": observed_generation,
            "replicas": 3,
            "updatedReplicas": 3,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
            ],
        },
    }


def custom_resource(condition_type: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "generation": 4},
        "status": {
            "observedGeneration": 4,
            "conditions": [{"type": condition_type, "status": "True", "reason": reason, "message": message}],
        },
    }


def test_kstatus_deployment() -> None:
    current: KStatus = {
        "status": "Current",
        "message": "Deployment is available. Replicas: 3",
        "conditions": [],
    }
    assert kstatus(deployment(2, 3)) == current
    assert kstatus(deployment(1, 3))["status"] == "InProgress"  # generation 2 not observed yet
    assert kstatus(deployment(2, 1))["status"] == "InProgress"


def test_kstatus_custom_resource_conditions() -> None:
    reconciling = kstatus(custom_resource("Reconciling", "Installing", "installing 2 of 3"))
    assert (reconciling["status"], reconciling["message"]) == ("InProgress", "installing 2 of 3")
    assert reconciling["conditions"][0]["type"] == "Reconciling"
    stalled = kstatus(custom_resource("Stalled", "InvalidSpec", "spec.source is empty"))
    assert stalled == {
        "status": "Failed",
        "message": "spec.source is empty",
        "conditions": [
            {"type": "Stalled", "status": "True", "reason": "InvalidSpec", "message": "spec.source is empty"}
        ],
    }
    assert kstatus(custom_resource("Ready", "Done", "all good"))["status"] == "Current"


def test_kstatus_error_exits_non_zero() -> None:
    # metadata.generation must be an integer: Compute fails, as it would in a GitOps tool.
    with pytest.raises(ToolFailedError, match=r"metadata\.generation"):
        kstatus({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "generation": "x"}})


def test_missing_build_names_the_make_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    with pytest.raises(ToolNotBuiltError, match="run make gitops-tools"):
        helm_binary()


def test_an_edit_of_our_programs_asks_for_a_new_build(tmp_path: Path) -> None:
    # The cache name of argocd-lua and kstatus carries a hash of their sources.
    (tmp_path / "go.mod").write_text("module example.dev/x\n")
    (tmp_path / "main.go").write_text("package main\n")
    before = build.source_hash(tmp_path)
    (tmp_path / "README.md").write_text("not a source\n")
    assert build.source_hash(tmp_path) == before
    (tmp_path / "main.go").write_text("package main\n\nfunc main() {}\n")
    assert build.source_hash(tmp_path) != before
