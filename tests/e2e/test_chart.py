"""The Helm chart: helm lint and helm template with each values file of charts/bundle-operator/ci/,
then the rendered manifests applied server-side to the dev cluster and the operator run with exactly
the rendered Deployment's command, arguments and environment, as its ServiceAccount (a token
kubeconfig) with only the rendered RBAC, until the Bundles, installations and Endpoint declared in
the values are Ready, and then uninstalled. A missing RBAC verb shows up as a 403 in the operator's
log or as a resource that never gets Ready: either fails the test."""

from __future__ import annotations

import base64
import json
import re
import secrets
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.documents import bundle_document
from tests.e2e.operator_harness import (
    CHART,
    MAP_API,
    condition,
    free_port,
    helm_env,
    policy_in_force,
    sigterm_and_wait,
)
from tests.gitops.tools import GitopsToolError, helm3_binary, helm_binary
from tests.integration.platform.platform_harness import TOKEN, PlatformProcess, start_platform

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CI = CHART / "ci"
VALUES_FILES = sorted(CI.glob("*-values.yaml"))
BUNDLES_VALUES = CI / "bundles-values.yaml"
CRDS = ROOT / "crds"
VENV_BIN = Path(sys.executable).parent
RELEASE = "bo"
RELEASE_NAMESPACE = "ops"
FULLNAME = "bo-bundle-operator"
TOKEN_DIR = "/var/run/secrets/bundle-operator/platform"

# What the operator is granted in each namespace it watches (the ClusterRole of the cluster-wide
# modes has the same rules plus the cluster-scoped ones).
NAMESPACED_RULES = [
    {
        "apiGroups": ["bundle-operator.dev"],
        "resources": ["bundles", "bundleinstallations", "endpoints"],
        "verbs": ["get", "list", "watch", "patch"],
    },
    {
        "apiGroups": ["bundle-operator.dev"],
        "resources": ["bundles/status", "bundleinstallations/status", "endpoints/status"],
        "verbs": ["patch"],
    },
    {
        "apiGroups": ["bundle-operator.dev"],
        "resources": ["bundleinstallations/finalizers", "endpoints/finalizers"],
        "verbs": ["update"],
    },
    {
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
]
CRD_RULE = {
    "apiGroups": ["apiextensions.k8s.io"],
    "resources": ["customresourcedefinitions"],
    "verbs": ["list", "watch"],
}
NAMESPACES_RULE = {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}

# The document of the house-style Bundle, which the values take from the user's ConfigMap.
HOUSE_STYLE = bundle_document(
    "house-style",
    skills=[
        {
            "key": "house_style",
            "source_type": "inline",
            "content": "---\nname: house-style\ndescription: How we write.\n---\n# House style\n",
        }
    ],
)


# --- helm ------------------------------------------------------------------------------------------


class HelmError(AssertionError):
    """helm exited non-zero; the message is its stderr."""


@pytest.fixture(scope="module")
def helm() -> Path:
    """helm v4.3.1 from `make gitops-tools`; the tests fail (never skip) without it."""
    try:
        return helm_binary()
    except GitopsToolError as error:
        pytest.fail(f"the chart tests need helm: {error}")


@pytest.fixture(scope="module")
def helm3() -> Path:
    """helm v3 from `make gitops-tools`: the chart promises Helm 3 as well."""
    try:
        return helm3_binary()
    except GitopsToolError as error:
        pytest.fail(f"the chart tests need helm 3: {error}")


def run_helm(helm: Path, *args: str) -> str:
    result = subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=120, check=False, env=helm_env()
    )
    if result.returncode != 0:
        raise HelmError(result.stderr.strip())
    return result.stdout


def render(
    helm: Path,
    *values: Path,
    overrides: dict[str, Any] | None = None,
    tmp: Path | None = None,
    release: str = RELEASE,
    namespace: str = RELEASE_NAMESPACE,
    api_versions: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """`helm template` with the CRDs; the documents, in order."""
    args = ["template", release, str(CHART), "--namespace", namespace, "--include-crds"]
    for api in api_versions:
        args += ["--api-versions", api]
    for path in values:
        args += ["-f", str(path)]
    if overrides is not None:
        assert tmp is not None
        extra = tmp / f"overrides-{secrets.token_hex(4)}.yaml"
        extra.write_text(yaml.safe_dump(overrides))
        args += ["-f", str(extra)]
    return [doc for doc in yaml.safe_load_all(run_helm(helm, *args)) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = find(docs, kind, name)
    return found


def operator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    [container] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)


# --- lint and template -----------------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, *VALUES_FILES], ids=lambda v: v.name if v else "chart-defaults")
def test_helm_lint_strict_passes(helm: Path, values: Path | None) -> None:
    out = run_helm(helm, "lint", "--strict", str(CHART), *(["-f", str(values)] if values else []))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


@pytest.mark.parametrize("values", [None, *VALUES_FILES], ids=lambda v: v.name if v else "chart-defaults")
def test_helm_3_lints_and_renders_what_helm_4_renders(helm: Path, helm3: Path, values: Path | None) -> None:
    files = [values] if values else []
    out = run_helm(helm3, "lint", "--strict", str(CHART), *[arg for v in files for arg in ("-f", str(v))])
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    # Helm 3 does not know the webhook configuration's kind and installs it after every other
    # (after the values' Bundles, too); Helm 4 before the custom resources. Either order works
    # with the default failurePolicy Ignore. Everything else comes in the same order.
    old, new = render(helm3, *files), render(helm, *files)
    webhooks = [d for d in old if d["kind"] == "ValidatingWebhookConfiguration"]
    assert webhooks == [d for d in new if d["kind"] == "ValidatingWebhookConfiguration"]
    assert [d for d in old if d not in webhooks] == [d for d in new if d not in webhooks]


@pytest.mark.parametrize("values", VALUES_FILES, ids=lambda v: v.name)
def test_notes_tell_how_to_check_that_it_runs(helm: Path, values: Path) -> None:
    out = run_helm(
        helm,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        "--dry-run=client",
        "-f",
        str(values),
    )
    notes = out.split("NOTES:", 1)[1]
    assert f"kubectl -n {RELEASE_NAMESPACE} rollout status deployment/{FULLNAME}" in notes
    assert "/readyz" in notes
    if values == BUNDLES_VALUES:
        assert f"kubectl -n {RELEASE_NAMESPACE} wait --for=condition=Ready bi/planning-assistant" in notes
        assert "runs without a token" in notes  # the embedded platform, no tokenSecret


def test_default_values_render_one_cluster_wide_operator_and_the_embedded_platform(helm: Path) -> None:
    docs = render(helm, CI / "default-values.yaml")
    assert kinds(docs) == sorted(
        [
            *["CustomResourceDefinition"] * 3,
            "ServiceAccount",
            *["ClusterRole", "ClusterRoleBinding"] * 2,
            "Role",
            "RoleBinding",
            *["Service"] * 3,
            "Deployment",
            "StatefulSet",
            "ValidatingWebhookConfiguration",
        ]
    )
    # The chart's CRDs are the repository's.
    rendered = {d["metadata"]["name"]: d for d in find(docs, "CustomResourceDefinition")}
    assert rendered == {
        doc["metadata"]["name"]: doc for doc in (yaml.safe_load(p.read_text()) for p in CRDS.glob("*.yaml"))
    }

    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == FULLNAME == one(docs, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = operator_container(docs)
    assert container["command"] == ["python", "-m", "bundle_operator"]
    assert container["image"] == "ghcr.io/bundle-operator/bundle-operator:0.1.0"
    assert container["args"] == [
        "--all-namespaces",
        f"--platform-url=http://{FULLNAME}-platform.{RELEASE_NAMESPACE}.svc:8080",
        "--metrics-port=9090",
        "--health-port=8081",
        "--log-level=INFO",
        "--platform-concurrency=16",
        "--workers=64",
        "--webhook-port=9443",
        "--webhook-cert-dir=/var/run/bundle-operator/webhook",
        "--webhook-failure-policy=Ignore",
        "--webhook-timeout-seconds=5",
        f"--webhook-cert-secret={FULLNAME}-webhook-tls",
        f"--webhook-service={FULLNAME}-webhook",
        f"--webhook-configuration={FULLNAME}",
    ]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert set(container["resources"]) == {"requests", "limits"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 9090, "health": 8081, "webhook": 9443}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/tmp", "/var/run/bundle-operator/webhook"}
    assert [v["name"] for v in pod["volumes"] if "emptyDir" in v] == ["tmp", "webhook-certs"]
    assert [e["name"] for e in container["env"]] == [
        "POD_NAME",
        "POD_NAMESPACE",
        "BUNDLE_OPERATOR_ENDPOINT_REFRESH_SECONDS",
    ]

    role = one(docs, "ClusterRole", FULLNAME)
    assert role["rules"] == [*NAMESPACED_RULES, CRD_RULE]
    assert_webhook(docs, deployment)
    binding = one(docs, "ClusterRoleBinding", FULLNAME)
    assert binding["roleRef"]["name"] == FULLNAME
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": FULLNAME, "namespace": RELEASE_NAMESPACE}
    ]

    metrics = one(docs, "Service", f"{FULLNAME}-metrics")
    assert metrics["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert metrics["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

    platform = one(docs, "StatefulSet")
    assert platform["spec"]["replicas"] == 1
    [claim] = platform["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    [serve] = platform["spec"]["template"]["spec"]["containers"]
    assert serve["command"] == ["bundlectl", "platform", "serve"]
    assert "--db=/data/platform.db" in serve["args"]
    assert {m["mountPath"]: m["name"] for m in serve["volumeMounts"]} == {"/data": "data", "/tmp": "tmp"}
    assert serve["securityContext"]["readOnlyRootFilesystem"] is True
    assert one(docs, "Service", f"{FULLNAME}-platform")["spec"]["ports"][0]["port"] == 8080


def assert_webhook(docs: list[dict[str, Any]], deployment: dict[str, Any]) -> None:
    """The admission webhook as DESIGN.md §9.1 sets it up, with the certificate the operator makes."""
    [config] = find(docs, "ValidatingWebhookConfiguration")
    [hook] = config["webhooks"]
    assert hook["clientConfig"] == {
        "service": {
            "name": f"{FULLNAME}-webhook",
            "namespace": RELEASE_NAMESPACE,
            "path": "/validate",
            "port": 443,
        }
    }
    assert (hook["failurePolicy"], hook["sideEffects"], hook["timeoutSeconds"]) == ("Ignore", "None", 5)
    assert hook["admissionReviewVersions"] == ["v1"]
    [rule] = hook["rules"]
    assert rule["operations"] == ["CREATE", "UPDATE"]  # a delete is never sent
    assert rule["resources"] == ["bundles", "bundleinstallations", "endpoints"]
    assert hook["matchConditions"] == [
        {
            "name": "spec-changed",
            "expression": "request.operation != 'UPDATE' || object.spec != oldObject.spec",
        }
    ]
    service = one(docs, "Service", f"{FULLNAME}-webhook")
    assert service["spec"]["ports"] == [
        {"name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    # The certificate's Secret is read and renewed by name only; the CA goes into this configuration only.
    secret_rules = one(docs, "Role", f"{FULLNAME}-webhook")["rules"]
    assert secret_rules == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [f"{FULLNAME}-webhook-tls"],
            "verbs": ["get", "update"],
        },
    ]
    assert one(docs, "ClusterRole", f"{FULLNAME}-webhook")["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingwebhookconfigurations"],
            "resourceNames": [FULLNAME],
            "verbs": ["get", "update"],
        }
    ]


def test_namespace_scoped_values_render_a_role_in_each_namespace_and_mount_the_token(helm: Path) -> None:
    docs = render(helm, CI / "namespaced-values.yaml")
    assert not find(docs, "Secret") and not find(docs, "StatefulSet")
    roles = [r for r in find(docs, "Role") if r["metadata"]["name"] == FULLNAME]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["agents", "agents-staging"]
    assert all(r["rules"] == NAMESPACED_RULES for r in roles)
    bindings = [b for b in find(docs, "RoleBinding") if b["metadata"]["name"] == FULLNAME]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["agents", "agents-staging"]
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": FULLNAME, "namespace": RELEASE_NAMESPACE}]
    # Named namespaces need no scanning of namespaces or CRDs: cluster-wide, only the webhook
    # configuration's own CA (by name), and the webhook judges the named namespaces only.
    assert [r["metadata"]["name"] for r in find(docs, "ClusterRole")] == [f"{FULLNAME}-webhook"]
    [hook] = one(docs, "ValidatingWebhookConfiguration")["webhooks"]
    assert hook["namespaceSelector"]["matchExpressions"][0]["values"] == ["agents", "agents-staging"]

    container = operator_container(docs)
    assert container["args"][:4] == [
        "--namespace=agents",
        "--namespace=agents-staging",
        "--platform-url=https://platform.example.com",
        f"--platform-token-file={TOKEN_DIR}/token",
    ]
    assert {"mountPath": TOKEN_DIR, "name": "platform-token", "readOnly": True} in container["volumeMounts"]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    [token] = [v for v in pod["volumes"] if v["name"] == "platform-token"]
    assert token["secret"] == {"secretName": "platform-token", "items": [{"key": "token", "path": "token"}]}
    # The token is a file: never an environment value.
    assert all("value" not in e or "token" not in e["name"].lower() for e in container["env"])


def test_standby_values_render_leader_election_and_a_rolling_update(helm: Path) -> None:
    docs = render(helm, CI / "standby-values.yaml")
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    container = operator_container(docs)
    start = container["args"].index("--leader-election")
    assert container["args"][start : start + 3] == [
        "--leader-election",
        f"--leader-election-namespace={RELEASE_NAMESPACE}",
        f"--leader-election-id={FULLNAME}",
    ]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"] if "valueFrom" in e}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    lease_role = one(docs, "Role", f"{FULLNAME}-leader-election")
    assert lease_role["metadata"]["namespace"] == RELEASE_NAMESPACE
    assert lease_role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [FULLNAME],
            "verbs": ["get", "update"],
        },
    ]
    assert (
        one(docs, "RoleBinding", f"{FULLNAME}-leader-election")["roleRef"]["name"]
        == f"{FULLNAME}-leader-election"
    )
    affinity = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"][
        "topologyKey"
    ] == ("kubernetes.io/hostname")
    monitor = one(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items()
        <= one(docs, "Service", f"{FULLNAME}-metrics")["metadata"]["labels"].items()
    )


def test_one_replica_has_no_leader_election(helm: Path) -> None:
    docs = render(helm, CI / "namespaced-values.yaml")
    assert not any(arg.startswith("--leader-election") for arg in operator_container(docs)["args"])
    assert not find(docs, "Role", f"{FULLNAME}-leader-election")


def test_bundles_from_values_render_each_spec_exactly(helm: Path) -> None:
    values = yaml.safe_load(BUNDLES_VALUES.read_text())
    docs = render(helm, BUNDLES_VALUES)
    assert not find(docs, "Secret")
    for key, kind in (
        ("bundles", "Bundle"),
        ("installations", "BundleInstallation"),
        ("endpoints", "Endpoint"),
    ):
        rendered = find(docs, kind)
        assert [d["metadata"]["name"] for d in rendered] == [item["name"] for item in values[key]]
        for item, doc in zip(values[key], rendered, strict=True):
            assert doc["apiVersion"] == "bundle-operator.dev/v1alpha1"
            assert doc["metadata"]["namespace"] == RELEASE_NAMESPACE
            expected = dict(item["spec"])
            if kind == "BundleInstallation":
                expected.setdefault("workspace", values["platform"]["defaultWorkspace"])
            assert doc["spec"] == expected
            assert item.get("labels", {}).items() <= doc["metadata"]["labels"].items()
            assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
            assert doc["metadata"].get("annotations") == item.get("annotations")
    [first, second] = find(docs, "BundleInstallation")
    assert (first["spec"]["workspace"], second["spec"]["workspace"]) == ("acme", "acme-docs")


BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("replicas-zero", {"replicas": 0}, "at '/replicas': minimum: got 0, want 1"),
    ("misspelled-key", {"watchNamespace": ["a"]}, "additional properties 'watchNamespace' not allowed"),
    ("pull-policy", {"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
    ("bad-digest", {"image": {"digest": "latest"}}, "at '/image/digest'"),
    ("platform-url", {"platform": {"url": "platform.example.com"}}, "at '/platform/url'"),
    ("namespace-name", {"watchNamespaces": ["Agents"]}, "at '/watchNamespaces/0'"),
    (
        "secret-value-and-ref",
        {
            "installations": [
                {
                    "name": "kit",
                    "spec": {
                        "bundleRef": {"name": "kit"},
                        "setup": [{"key": "t", "value": "x", "secretKeyRef": {"name": "s", "key": "k"}}],
                    },
                }
            ]
        },
        "at '/installations/0/spec/setup/0': 'oneOf' failed",
    ),
    (
        "misspelled-spec-field",
        {"installations": [{"name": "kit", "spec": {"bundleRef": {"name": "kit"}, "workSpace": "acme"}}]},
        "at '/installations/0/spec': additional properties 'workSpace' not allowed",
    ),
    (
        "two-sources",
        {
            "bundles": [
                {
                    "name": "kit",
                    "spec": {"source": {"configMapRef": {"name": "a", "key": "b"}, "inline": {}}},
                }
            ]
        },
        "at '/bundles/0/spec/source'",
    ),
    (
        "literal-secret-value",
        {
            "bundles": [
                {
                    "name": "kit",
                    "spec": {
                        "source": {
                            "inline": bundle_document(
                                "kit",
                                version=None,
                                setup=[{"key": "token", "label": "Token", "type": "secret"}],
                            )
                        }
                    },
                }
            ],
            "installations": [
                {
                    "name": "kit",
                    "spec": {"bundleRef": {"name": "kit"}, "setup": [{"key": "token", "value": "x"}]},
                }
            ],
        },
        "installations[0] (kit): setup[0] (token) is a secret field of Bundle kit: give secretKeyRef",
    ),
    (
        "no-workspace",
        {
            "platform": {"defaultWorkspace": ""},
            "installations": [{"name": "kit", "spec": {"bundleRef": {"name": "kit"}}}],
        },
        "installations[0] (kit): give spec.workspace or platform.defaultWorkspace",
    ),
    (
        "monitor-without-service",
        {"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}},
        "metrics.serviceMonitor.enabled needs metrics.service.enabled",
    ),
]


def test_an_image_digest_pins_both_containers(helm: Path, tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    docs = render(
        helm, overrides={"image": {"repository": "registry.example.com/bo", "digest": digest}}, tmp=tmp_path
    )
    [platform] = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"]
    assert operator_container(docs)["image"] == platform["image"] == f"registry.example.com/bo@{digest}"


def test_a_trusted_ca_bundle_is_mounted_and_named_by_ssl_cert_file(helm: Path, tmp_path: Path) -> None:
    assert "SSL_CERT_FILE" not in {e["name"] for e in operator_container(render(helm))["env"]}
    docs = render(
        helm,
        overrides={"operator": {"trustedCA": {"configMap": "corp-ca", "key": "bundle.pem"}}},
        tmp=tmp_path,
    )
    container = operator_container(docs)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SSL_CERT_FILE"] == "/etc/bundle-operator/trusted-ca/bundle.pem"
    mount = next(m for m in container["volumeMounts"] if m["name"] == "trusted-ca")
    assert (mount["mountPath"], mount["readOnly"]) == ("/etc/bundle-operator/trusted-ca", True)
    volume = next(
        v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"] if v["name"] == "trusted-ca"
    )
    assert volume["configMap"] == {"name": "corp-ca", "items": [{"key": "bundle.pem", "path": "bundle.pem"}]}


def test_tracing_otlp_endpoint_reaches_the_operator_and_the_platform(helm: Path, tmp_path: Path) -> None:
    def otlp_env(docs: list[dict[str, Any]]) -> list[str | None]:
        [platform] = one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"]
        return [
            {e["name"]: e.get("value") for e in container.get("env") or []}.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            for container in (operator_container(docs), platform)
        ]

    assert otlp_env(render(helm)) == [None, None], "tracing is off by default"
    collector = "http://otel-collector.monitoring:4318"
    docs = render(helm, overrides={"tracing": {"otlpEndpoint": collector}}, tmp=tmp_path)
    assert otlp_env(docs) == [collector, collector]
    with pytest.raises(HelmError) as failure:
        render(helm, overrides={"tracing": {"otlpEndpoint": "otel-collector:4318"}}, tmp=tmp_path)
    assert "otlpEndpoint" in str(failure.value)


def test_the_endpoint_refresh_interval_reaches_the_operator(helm: Path, tmp_path: Path) -> None:
    def refresh(docs: list[dict[str, Any]]) -> str | None:
        env = {e["name"]: e.get("value") for e in operator_container(docs).get("env") or []}
        return env.get("BUNDLE_OPERATOR_ENDPOINT_REFRESH_SECONDS")

    assert refresh(render(helm)) == "30"
    assert refresh(render(helm, overrides={"operator": {"endpointRefreshSeconds": 5}}, tmp=tmp_path)) == "5"
    with pytest.raises(HelmError) as failure:
        render(helm, overrides={"operator": {"endpointRefreshSeconds": 0}}, tmp=tmp_path)
    assert "endpointRefreshSeconds" in str(failure.value)


def test_a_cluster_older_than_the_crds_need_fails_with_a_message(helm: Path) -> None:
    with pytest.raises(HelmError) as failure:
        run_helm(helm, "template", RELEASE, str(CHART), "--kube-version", "1.28.0")
    assert "chart requires kubeVersion: >=1.29.0-0" in str(failure.value)


@pytest.mark.parametrize(
    ("values", "message"), [(v, m) for _, v, m in BAD_VALUES], ids=[i for i, _, _ in BAD_VALUES]
)
def test_bad_values_fail_with_a_message(
    helm: Path, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError) as failure:
        render(helm, overrides=values, tmp=tmp_path)
    assert message in str(failure.value)


# --- processes as the pod would run them ------------------------------------------------------------


@dataclass
class PodProcess:
    """One container of a rendered pod run as a local process: the same command, arguments and
    environment, with each volume a local folder (a Secret volume holds the Secret's keys, as the
    kubelet writes them) and its mount path replaced by that folder in the arguments."""

    container: dict[str, Any]
    pod: dict[str, Any]
    workdir: Path
    namespace: str
    pod_name: str
    secret_data: dict[str, dict[str, bytes]] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.container['name']}.log"

    def mounts(self) -> dict[str, Path]:
        volumes = {v["name"]: v for v in self.pod.get("volumes", [])}
        claims = {c["metadata"]["name"] for c in self.pod.get("volumeClaimTemplates", [])}
        local: dict[str, Path] = {}
        for mount in self.container.get("volumeMounts", []):
            folder = self.workdir / "volumes" / mount["name"]
            folder.mkdir(parents=True, exist_ok=True)
            volume = volumes.get(mount["name"])
            if volume is not None and "secret" in volume:
                data = self.secret_data[volume["secret"]["secretName"]]
                for item in volume["secret"].get("items") or [{"key": k, "path": k} for k in data]:
                    (folder / item["path"]).write_bytes(data[item["key"]])
            else:
                assert (volume is not None and "emptyDir" in volume) or mount["name"] in claims, mount
            local[mount["mountPath"]] = folder
        return local

    def environment(self) -> dict[str, str]:
        env = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": str(self.workdir), "PYTHONUNBUFFERED": "1"}
        fields = {"metadata.name": self.pod_name, "metadata.namespace": self.namespace}
        for var in self.container.get("env", []):
            if "value" in var:
                env[var["name"]] = var["value"]
            elif "fieldRef" in var["valueFrom"]:
                env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
            else:
                ref = var["valueFrom"]["secretKeyRef"]
                env[var["name"]] = self.secret_data[ref["name"]][ref["key"]].decode()
        return {**env, **self.extra_env}

    def argv(self, env: dict[str, str]) -> list[str]:
        mounts = self.mounts()
        command = [*self.container.get("command", []), *self.container.get("args", [])]
        resolved = []
        for arg in command:
            # $(VAR) from the container's environment, as the kubelet expands it.
            arg = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), arg)
            # One pass over every mount path, longest first: a folder put in is never rewritten again.
            paths = "|".join(re.escape(path) for path in sorted(mounts, key=len, reverse=True))
            if paths:
                arg = re.sub(rf"(^|=)({paths})(?=/|$)", lambda m: m.group(1) + str(mounts[m.group(2)]), arg)
            resolved.append(arg)
        executable = VENV_BIN / resolved[0]
        assert executable.exists(), f"{resolved[0]} is not in the virtualenv"
        return [str(executable), *resolved[1:]]

    def start(self) -> PodProcess:
        env = self.environment()
        argv = self.argv(env)
        (self.workdir / "argv.json").write_text(json.dumps(argv))
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        return self

    def check_running(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"{self.container['name']} exited: {self.log.read_text()[-3000:]}")

    def stop(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        return sigterm_and_wait(self.process, timeout)


def test_embedded_platform_runs_as_rendered(helm: Path, tmp_path: Path) -> None:
    port = free_port()
    docs = render(
        helm,
        overrides={
            "embeddedPlatform": {"port": port},
            "platform": {"tokenSecret": {"name": "platform-token"}},
        },
        tmp=tmp_path,
    )
    statefulset = one(docs, "StatefulSet")
    pod = {**statefulset["spec"]["template"]["spec"], **statefulset["spec"]}
    [container] = pod["containers"]
    # The operator's default platform is this one, with the same token.
    operator_args = operator_container(docs)["args"]
    assert f"--platform-url=http://{FULLNAME}-platform.{RELEASE_NAMESPACE}.svc:{port}" in operator_args
    assert f"--platform-token-file={TOKEN_DIR}/token" in operator_args
    # The platform reads the token from the mounted Secret too: not in its arguments or environment.
    assert f"--token-file={TOKEN_DIR}/token" in container["args"]
    assert not any(a.startswith("--token=") for a in container["args"]) and "env" not in container
    running = PodProcess(
        container,
        pod,
        tmp_path,
        RELEASE_NAMESPACE,
        f"{FULLNAME}-platform-0",
        {"platform-token": {"token": TOKEN.encode()}},
    ).start()
    try:

        def healthy() -> bool:
            running.check_running()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, 30, "the embedded platform's /healthz")
        url = f"http://127.0.0.1:{port}/v1/workspaces/acme/agents"
        assert httpx.get(url, timeout=5).status_code == 401
        assert httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5).status_code == 200
        # The database lives on the volume of the claim, not on the (read-only) root filesystem.
        assert (tmp_path / "volumes" / "data" / "platform.db").exists()
    finally:
        assert running.stop() == 0


# --- the rendered operator on the dev cluster, as its ServiceAccount ---------------------------------


def token_kubeconfig(devcluster: DevCluster, token: str, path: Path) -> Path:
    """A kubeconfig that authenticates with a bearer token, as a pod's in-cluster config does."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "devcluster",
                "cluster": {
                    "server": devcluster.server,
                    "certificate-authority-data": base64.b64encode(devcluster.ca_cert.read_bytes()).decode(),
                },
            }
        ],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "devcluster", "user": "operator"}}],
        "current-context": "operator",
    }
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config))
    return path


def denied_calls(log: Path) -> list[str]:
    """Lines of the operator's log that report a call the API server refused for want of RBAC."""
    return [
        line
        for line in log.read_text(errors="replace").splitlines()
        if re.search(r"Forbidden|forbidden|Not enough permissions", line)
    ]


@pytest.fixture
def solo_namespace(kubectl: Kubectl, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace the session's operator does not watch (e2e-solo-*): this test runs its own."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.callspec.id.lower())[:12].strip("-")
    name = f"e2e-solo-chart-{slug}-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def token_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlatformProcess]:
    """A reference platform of this test's own that requires the token."""
    folder = tmp_path_factory.mktemp("chart-platform")
    running = start_platform(folder / "platform.db", "--token", TOKEN, log=folder / "platform.log")
    try:
        yield running
    finally:
        running.stop()


def apply_docs(kubectl: Kubectl, docs: list[dict[str, Any]]) -> None:
    kubectl.run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))


def finalizer_owners(kubectl: Kubectl, name: str, namespace: str) -> list[str]:
    """The field managers that own an installation's metadata.finalizers."""
    out = kubectl.run(
        "get", "bundleinstallation", name, "-n", namespace, "-o", "json", "--show-managed-fields"
    ).stdout
    return [
        entry["manager"]
        for entry in json.loads(out)["metadata"].get("managedFields") or []
        if "f:finalizers" in (entry.get("fieldsV1") or {}).get("f:metadata", {})
    ]


def metric(text: str, name: str) -> float | None:
    """One unlabelled sample of a Prometheus text exposition."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


@pytest.mark.parametrize("mode", ["namespaced", "patterns", "standby"])
def test_rendered_operator_installs_the_values_bundles_with_only_its_rbac(
    helm: Path,
    devcluster: DevCluster,
    kubectl: Kubectl,
    token_platform: PlatformProcess,
    solo_namespace: str,
    tmp_path: Path,
    mode: str,
) -> None:
    ns = solo_namespace
    release = f"chart-{ns.rsplit('-', 1)[-1]}"
    fullname = f"{release}-bundle-operator"
    replicas = 2 if mode == "standby" else 1
    # namespaced and standby: a Role in the namespace; patterns: a ClusterRole.
    watch = [f"{ns}*,!{ns}-not-this-one"] if mode == "patterns" else [ns]

    def values(health_port: int, metrics_port: int, webhook_port: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "watchNamespaces": watch,
            "platform": {
                "url": token_platform.url,
                "tokenSecret": {"name": "platform-token", "key": "token"},
            },
            "operator": {"healthPort": health_port, "metricsPort": metrics_port},
            "webhook": {"port": webhook_port},
        }

    # Each replica's pod has an address of its own; here they share one, so each replica's render
    # differs in the two ports (checked below) and in nothing else.
    ports = [(free_port(), free_port(), free_port()) for _ in range(replicas)]
    # As `helm install` renders against this cluster, which serves MutatingAdmissionPolicy.
    renders = [
        render(
            helm,
            BUNDLES_VALUES,
            overrides=values(*p),
            tmp=tmp_path,
            release=release,
            namespace=ns,
            api_versions=(MAP_API,),
        )
        for p in ports
    ]
    docs = renders[0]
    # The finalizer policy, bound to the watched namespace; none for patterns (finalizer_policy.yaml).
    bindings = find(docs, "MutatingAdmissionPolicyBinding")
    if mode == "patterns":
        assert not bindings and not find(docs, "MutatingAdmissionPolicy")
    else:
        [binding] = bindings
        selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert selector == [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [ns]}]
    assert not find(docs, "Secret"), "the chart renders no Secret"
    if mode == "patterns":
        assert one(docs, "ClusterRole", fullname)["rules"] == [*NAMESPACED_RULES, CRD_RULE, NAMESPACES_RULE]
    else:
        operator_roles = [r for r in find(docs, "Role") if r["metadata"]["name"] != f"{fullname}-webhook"]
        assert [r["metadata"]["namespace"] for r in operator_roles] == [ns] * replicas
        cluster_wide = [r["metadata"]["name"] for r in find(docs, "ClusterRole")]
        assert cluster_wide == [f"{fullname}-webhook"], "named namespaces need nothing else cluster-wide"
    if mode == "standby":
        assert one(docs, "Deployment")["spec"]["strategy"]["type"] == "RollingUpdate"
        assert "--leader-election" in operator_container(docs)["args"]
        lease_role = one(docs, "Role", f"{fullname}-leader-election")
        assert lease_role["rules"][1]["resourceNames"] == [fullname]

    def without_ports(container: dict[str, Any]) -> dict[str, Any]:
        port_args = ("--metrics-port=", "--health-port=", "--webhook-port=")
        args = [a for a in container["args"] if not a.startswith(port_args)]
        return {**container, "args": args, "ports": None, "livenessProbe": None, "readinessProbe": None}

    assert all(
        without_ports(operator_container(r)) == without_ports(operator_container(docs)) for r in renders
    )

    # What the user manages: the platform token, the setup Secret, the ConfigMap of a Bundle.
    kubectl.run("create", "secret", "generic", "platform-token", "-n", ns, f"--from-literal=token={TOKEN}")
    kubectl.run(
        "create",
        "secret",
        "generic",
        "planning-secrets",
        "-n",
        ns,
        f"--from-literal=weather_api_key={secrets.token_hex(12)}",
        f"--from-literal=notes_signing_key={secrets.token_hex(24)}",
    )
    kubectl.run(
        "create",
        "configmap",
        "house-style",
        "-n",
        ns,
        f"--from-literal=bundle.yaml={yaml.safe_dump(HOUSE_STYLE)}",
    )

    # Everything the chart renders, applied server-side as Helm 4 does: CRDs first.
    started = time.monotonic()
    crd_docs = find(docs, "CustomResourceDefinition")
    assert len(crd_docs) == 3
    apply_docs(kubectl, crd_docs)
    for crd in crd_docs:
        kubectl.wait_for_condition("crd", crd["metadata"]["name"], "Established", timeout=30)
    # The finalizer policy before the rest, so that the values' installations are created under it.
    # (Helm applies kinds it does not know last; the first objects then get the operator's own
    # finalizer patch instead, which is as correct.)
    policies = [d for d in docs if d["kind"].startswith("MutatingAdmissionPolicy")]
    if policies:
        apply_docs(kubectl, policies)
        wait_until(lambda: policy_in_force(kubectl, ns), 30, "the finalizer policy in force")
    apply_docs(kubectl, [d for d in docs if d["kind"] != "CustomResourceDefinition" and d not in policies])

    # The pod's identity: a token of the rendered ServiceAccount, as a projected token would be.
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    token = kubectl.run(
        "create", "token", pod["serviceAccountName"], "-n", ns, "--duration=1h"
    ).stdout.strip()
    kubeconfig = token_kubeconfig(devcluster, token, tmp_path / "operator.kubeconfig")
    platform_token = base64.b64decode(kubectl.get("secret", "platform-token", ns)["data"]["token"])
    operators: list[PodProcess] = []
    for index, rendered in enumerate(renders):
        workdir = tmp_path / f"replica-{index}"
        workdir.mkdir()
        operators.append(
            PodProcess(
                operator_container(rendered),
                one(rendered, "Deployment")["spec"]["template"]["spec"],
                workdir,
                ns,
                f"{fullname}-7d9c5b-{index}x4z",
                {"platform-token": {"token": platform_token}},
                extra_env={"KUBECONFIG": str(kubeconfig)},
            ).start()
        )
    health_port = {id(op): p[0] for op, p in zip(operators, ports, strict=True)}
    metrics_port = {id(op): p[1] for op, p in zip(operators, ports, strict=True)}
    webhook_port = {id(op): p[2] for op, p in zip(operators, ports, strict=True)}

    def running() -> list[PodProcess]:
        return [op for op in operators if op.process is not None and op.process.returncode is None]

    def healthy() -> None:
        # A refused call fails the test at once, with the operator's own words.
        for op in running():
            op.check_running()
            assert denied_calls(op.log) == [], op.log

    def leaders() -> list[PodProcess]:
        healthy()
        return [
            op
            for op in running()
            if metric(
                httpx.get(f"http://127.0.0.1:{metrics_port[id(op)]}/metrics", timeout=5).text,
                "bundle_operator_leader",
            )
            == 1
        ]

    def ready(kind: str, name: str, timeout: float) -> dict[str, Any]:
        def current() -> dict[str, Any] | None:
            healthy()
            obj = kubectl.get_or_none(kind, name, ns)
            if (
                obj is None
                or obj.get("status", {}).get("observedGeneration") != obj["metadata"]["generation"]
            ):
                return None
            return obj if (condition(obj, "Ready") or {}).get("status") == "True" else None

        return wait_until(current, timeout, f"{kind} {ns}/{name} Ready")

    def gone(kind: str, name: str) -> None:
        def deleted() -> bool:
            healthy()
            return kubectl.get_or_none(kind, name, ns) is None

        wait_until(deleted, 90, f"{kind} {ns}/{name} deleted")

    codes: list[int] = []
    try:
        for op in operators:

            def serving(op: PodProcess = op) -> bool:
                healthy()
                try:
                    url = f"http://127.0.0.1:{health_port[id(op)]}/readyz"
                    return httpx.get(url, timeout=1).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(serving, 60, "the rendered operator's /readyz")
            mounted = str(op.workdir / "volumes" / "platform-token" / "token")
            assert f"--platform-token-file={mounted}" in json.loads((op.workdir / "argv.json").read_text())

        for name in ("planning-assistant", "house-style"):
            ready("bundle", name, timeout=60)
            installation = ready("bundleinstallation", name, timeout=120)
            assert all(entity.get("id") for entity in installation["status"]["entities"])
            # Set by the API server at create (no field manager), or by the operator's own patch.
            owners = finalizer_owners(kubectl, name, ns)
            assert owners == (["kopf"] if mode == "patterns" else []), (mode, owners)
        endpoint = ready("bep", "planning-assistant", timeout=90)
        print(f"{mode}: from apply to every values resource Ready: {time.monotonic() - started:.1f} s")
        assert (condition(endpoint, "Ready") or {}).get("reason") == "Serving"

        # The Secrets it owns: the record of each installation, the Endpoint's key.
        state = kubectl.get("secret", "planning-assistant-bundle-state", ns)
        [owner] = state["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["blockOwnerDeletion"]) == (
            "BundleInstallation",
            "planning-assistant",
            True,
        )
        key = kubectl.get("secret", "planning-assistant-endpoint", ns)
        assert key["metadata"]["ownerReferences"][0]["kind"] == "Endpoint"
        assert base64.b64decode(key["data"]["apiKey"])
        # Its Events reach the installation (a refused Event is only logged, so look).
        events = json.loads(
            kubectl.run(
                "get",
                "events",
                "-n",
                ns,
                "--field-selector",
                "involvedObject.name=planning-assistant",
                "-o",
                "json",
            ).stdout
        )["items"]
        assert any(e["reportingComponent"] == "bundle-operator" for e in events)

        if mode == "standby":
            # One leads, by the Lease the chart's Role allows; stopped, it hands over to the other.
            [leader] = wait_until(lambda: leaders() or None, 30, "one leader")
            lease = kubectl.get("lease", fullname, ns)
            assert lease["spec"]["holderIdentity"] == leader.environment()["POD_NAME"]
            codes.append(leader.stop())
            [successor] = wait_until(lambda: leaders() or None, 60, "the standby to take over")
            assert successor is not leader
            wait_until(
                lambda: (
                    kubectl.get("lease", fullname, ns)["spec"]["holderIdentity"]
                    == successor.environment()["POD_NAME"]
                ),
                30,
                "the Lease's new holder",
            )
        else:
            [only] = operators
            assert (
                metric(
                    httpx.get(f"http://127.0.0.1:{metrics_port[id(only)]}/metrics", timeout=5).text,
                    "bundle_operator_leader",
                )
                == 1
            )

        # Uninstall: the finalizers, the record Secrets' finalizer and their deletion.
        kubectl.run("delete", "bep,bi", "--all", "-n", ns, "--wait=false")
        for kind, name in (
            ("bep", "planning-assistant"),
            ("bundleinstallation", "planning-assistant"),
            ("bundleinstallation", "house-style"),
        ):
            gone(kind, name)
        assert kubectl.get_or_none("secret", "planning-assistant-bundle-state", ns) is None
        # The webhook certificate the replicas made with only the chart's RBAC: one pair in the
        # Secret, its CA in the chart's webhook configuration, served by every replica still running.
        pair = kubectl.get("secret", f"{fullname}-webhook-tls", ns)["data"]
        config = kubectl.get("validatingwebhookconfiguration", fullname)
        assert config["webhooks"][0]["clientConfig"]["caBundle"] == pair["ca.crt"]
        ca = ssl.create_default_context(cadata=base64.b64decode(pair["ca.crt"]).decode())
        ca.check_hostname = False  # the certificate names the Service; here it is served on loopback
        for op in running():
            answer = httpx.post(
                f"https://127.0.0.1:{webhook_port[id(op)]}/validate", content=b"{}", verify=ca, timeout=5
            )
            assert answer.status_code == 400
        healthy()
    finally:
        codes += [op.stop() for op in running()]
        kubectl.run(
            "delete",
            "clusterrole,clusterrolebinding,validatingwebhookconfiguration,"
            "mutatingadmissionpolicy,mutatingadmissionpolicybinding",
            "-l",
            f"app.kubernetes.io/instance={release}",
            check=False,
        )
    assert codes == [0] * replicas, [op.log.read_text()[-3000:] for op in operators]
