"""Analyze at admission on the dev control plane, with a real ValidatingWebhookConfiguration whose
`url` clientConfig points at the operator's webhook on 127.0.0.1, trusted through a test CA.

What a person at `kubectl apply` sees: refusals with each issue's code and path, warnings printed
by kubectl, the same with `--dry-run=server`; a certificate replaced on disk and served without a
restart; two replicas (leader and standby) both answering; the webhook down under Ignore and Fail.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

from bundle_operator.devcluster import DevCluster, Kubectl, wait_until
from tests.documents import bundle_document
from tests.e2e.operator_harness import OperatorProcess, free_port, resource
from tests.integration.platform.platform_harness import PlatformProcess
from tests.tls import TlsFiles, throwaway_tls

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("crds")]

BROKEN = bundle_document("broken-kit", agents=[{"key": "bot", "name": "Bot", "mcps": ["nowhere"]}])
WARNED = bundle_document("warned-kit", setup=[{"key": "org", "label": "Org", "type": "string"}])


class Webhook:
    """The operator's webhook: its port, its certificate directory and the configuration's name."""

    def __init__(self, kubectl: Kubectl, namespace: str, tmp: Path) -> None:
        self.kubectl = kubectl
        self.namespace = namespace
        self.name = f"e2e-{secrets.token_hex(3)}.bundle-operator.dev"
        self.cert_dir = tmp / "certs"
        self.cert_dir.mkdir()
        self.port = free_port()
        self.tls = self.rotate(tmp / "ca-1")

    def rotate(self, folder: Path) -> TlsFiles:
        """A new CA and serving certificate, written where the operator reads them."""
        folder.mkdir()
        tls = throwaway_tls(folder, f"webhook CA {folder.name}")
        (self.cert_dir / "tls.key").write_bytes(tls.key.read_bytes())
        (self.cert_dir / "tls.crt").write_bytes(tls.cert.read_bytes())
        self.tls = tls
        return tls

    def configure(self, failure_policy: str, ports: list[int] | None = None) -> None:
        """The ValidatingWebhookConfiguration for this namespace only, one webhook per port."""
        webhooks = [
            {
                "name": f"{index}.{self.name}",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}/validate",
                    "caBundle": base64.b64encode(self.tls.ca_pem.encode()).decode(),
                },
                "rules": [
                    {
                        "apiGroups": ["bundle-operator.dev"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["bundles", "bundleinstallations", "endpoints"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                "failurePolicy": failure_policy,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
            for index, port in enumerate(ports or [self.port])
        ]
        config = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": webhooks,
        }
        self.kubectl.apply(yaml.safe_dump(config))

    def remove(self) -> None:
        self.kubectl.run(
            "delete", "validatingwebhookconfiguration", self.name, "--ignore-not-found", check=False
        )


@pytest.fixture
def webhook(kubectl: Kubectl, solo_namespace: str, tmp_path: Path) -> Iterator[Webhook]:
    served = Webhook(kubectl, solo_namespace, tmp_path)
    try:
        yield served
    finally:
        served.remove()


def start_operator(
    devcluster: DevCluster, platform: PlatformProcess, webhook: Webhook, log: Path, port: int, *extra: str
) -> OperatorProcess:
    flags = ("--webhook-port", str(port), "--webhook-cert-dir", str(webhook.cert_dir), *extra)
    scope = ("--namespace", webhook.namespace)
    return OperatorProcess(devcluster.kubeconfig, platform.url, log, extra=flags, scope=scope).start()


def apply_bundle(kubectl: Kubectl, namespace: str, document: dict[str, Any], *flags: str) -> Any:
    manifest = yaml.safe_dump(resource("Bundle", document["name"], {"source": {"inline": document}}))
    args = ["apply", "-n", namespace, *flags, "-f", "-"]
    return kubectl.run(*args, stdin=manifest, check=False)


def leader_metric(text: str) -> float:
    return next(
        float(line.split()[1]) for line in text.splitlines() if line.startswith("bundle_operator_leader ")
    )


def admission_metrics(text: str) -> dict[tuple[str, str, str], float]:
    """bundle_operator_admission_reviews_total as (kind, operation, result) -> count."""
    return {
        (s.labels["kind"], s.labels["operation"], s.labels["result"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "bundle_operator_admission_reviews_total"
    }


def certificate_expiry(text: str) -> float | None:
    return next(
        (
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "bundle_operator_webhook_certificate_expiry_timestamp_seconds"
        ),
        None,
    )


def not_after(certificate: Path) -> float:
    return x509.load_pem_x509_certificate(certificate.read_bytes()).not_valid_after_utc.timestamp()


def refused_for_the_broken_reference(answer: Any) -> bool:
    return bool(
        answer.returncode != 0
        and "unknown_reference" in answer.stderr
        and "/agents/0/mcps/0" in answer.stderr
    )


def test_kubectl_apply_is_refused_with_codes_and_paths_and_warned(
    kubectl: Kubectl, devcluster: DevCluster, platform: PlatformProcess, webhook: Webhook, tmp_path: Path
) -> None:
    operator = start_operator(devcluster, platform, webhook, tmp_path / "operator.log", webhook.port)
    try:
        webhook.configure("Fail")
        dry = apply_bundle(kubectl, webhook.namespace, BROKEN, "--dry-run=server")
        assert refused_for_the_broken_reference(dry), dry.stderr
        refused = apply_bundle(kubectl, webhook.namespace, BROKEN)
        assert refused_for_the_broken_reference(refused), refused.stderr
        print("\n" + refused.stderr)
        assert kubectl.get_or_none("bundle", "broken-kit", webhook.namespace) is None
        warned = apply_bundle(kubectl, webhook.namespace, WARNED)
        assert warned.returncode == 0, warned.stderr
        assert "Warning: unused_setup_field at /setup/0/key" in warned.stderr
        assert kubectl.get_or_none("bundle", "warned-kit", webhook.namespace) is not None
        status = Path(f"/proc/{operator.process.pid}/status").read_text() if operator.process else ""
        rss = next((line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")), "?")
        print(f"operator with the webhook on, after serving admission: RSS {rss} kB")
        # The dry run and the apply of the broken Bundle were refused, the warned one admitted.
        reviews = admission_metrics(operator.metrics())
        assert reviews.get(("Bundle", "CREATE", "denied")) == 2, reviews
        assert reviews.get(("Bundle", "CREATE", "allowed"), 0) >= 1, reviews
        assert reviews.get(("Bundle", "CREATE", "error")) == 0, reviews
        assert certificate_expiry(operator.metrics()) == not_after(webhook.tls.cert)

        # A new CA and certificate on disk: served without a restart once the configuration trusts it.
        webhook.rotate(tmp_path / "ca-2")
        webhook.configure("Fail")
        for _ in range(50):
            again = apply_bundle(kubectl, webhook.namespace, BROKEN)
            if refused_for_the_broken_reference(again):
                break
        else:
            pytest.fail(f"the rotated certificate was not served: {again.stderr}")
        assert operator.process is not None and operator.process.poll() is None
        assert certificate_expiry(operator.metrics()) == not_after(webhook.tls.cert)

        # Down: Fail refuses everything it would judge, Ignore lets it through unjudged.
        operator.stop()
        failing = apply_bundle(kubectl, webhook.namespace, {**WARNED, "name": "another-kit"})
        assert failing.returncode != 0 and "failed calling webhook" in failing.stderr
        webhook.configure("Ignore")
        ignored = apply_bundle(kubectl, webhook.namespace, BROKEN)
        assert ignored.returncode == 0, ignored.stderr
    finally:
        operator.stop()


def test_two_replicas_both_answer_admission_leader_or_not(
    kubectl: Kubectl, devcluster: DevCluster, platform: PlatformProcess, webhook: Webhook, tmp_path: Path
) -> None:
    election = ("--leader-election", "--leader-election-namespace", webhook.namespace)
    ports = [webhook.port, free_port()]
    replicas = [
        start_operator(devcluster, platform, webhook, tmp_path / f"replica-{i}.log", port, *election)
        for i, port in enumerate(ports)
    ]
    try:
        # Each replica refuses on its own: a webhook per replica, both consulted on every request.
        webhook.configure("Fail", ports)
        refused = apply_bundle(kubectl, webhook.namespace, BROKEN)
        assert refused_for_the_broken_reference(refused), refused.stderr
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "direct",
                "kind": {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": "Bundle"},
                "namespace": webhook.namespace,
                "operation": "CREATE",
                "object": {"metadata": {"name": "b"}, "spec": {"source": {"inline": BROKEN}}},
            },
        }
        for port in ports:
            answer = httpx.post(
                f"https://127.0.0.1:{port}/validate",
                json=review,
                verify=webhook.tls.client_context(),
                timeout=10,
            )
            assert answer.status_code == 200 and answer.json()["response"]["allowed"] is False

        def roles() -> list[float] | None:
            found = [leader_metric(r.metrics()) for r in replicas]
            return found if sorted(found) == [0.0, 1.0] else None

        wait_until(roles, 60, "one leader and one standby")
    finally:
        for replica in replicas:
            replica.stop()
