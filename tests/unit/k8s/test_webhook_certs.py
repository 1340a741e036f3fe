"""The operator's own webhook certificate: made once, shared through its Secret, trusted by the
webhook configuration, renewed before it expires or when the Service changes."""

from __future__ import annotations

import base64
import copy
import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from bundle_operator.k8s.kube import KubeError
from bundle_operator.k8s.webhook.certs import (
    CONFIGURATIONS,
    RENEW_BEFORE,
    TRUST_ATTEMPTS,
    VALIDITY,
    CertificateKeeper,
    CertificateSettings,
)

pytestmark = pytest.mark.anyio

NOW = datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC)
CONFIG = f"{CONFIGURATIONS}/bundle-operator"


class FakeKube:
    """Secrets and one webhook configuration, with resourceVersions as the API server keeps them."""

    def __init__(self) -> None:
        self.secrets: dict[str, dict[str, Any]] = {}
        self.objects: dict[str, dict[str, Any]] = {
            CONFIG: {"metadata": {"name": "bundle-operator"}, "webhooks": [{"name": "a"}, {"name": "b"}]}
        }
        self.writes = 0
        self.conflict_next = False
        # Written by another replica between this one's read and write of the configuration.
        self.written_meanwhile: list[dict[str, Any]] = []

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.secrets.get(name)

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        body["metadata"]["resourceVersion"] = "1"
        self.secrets[body["metadata"]["name"]] = body
        self.writes += 1
        return body

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.conflict_next:
            self.conflict_next = False
            raise KubeError(409, "Conflict", "the object has been modified")
        body["metadata"]["resourceVersion"] = str(int(self.secrets[name]["metadata"]["resourceVersion"]) + 1)
        self.secrets[name] = body
        self.writes += 1
        return body

    async def read(self, path: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get(path))

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.written_meanwhile:
            self.objects[path] = self.written_meanwhile.pop(0)
            raise KubeError(409, "Conflict", "the object has been modified")
        self.objects[path] = body
        self.writes += 1
        return body


def settings(tmp_path: Path, service: str = "bundle-operator") -> CertificateSettings:
    return CertificateSettings(
        "ops", "bundle-operator-webhook-tls", service, "bundle-operator", tmp_path / "certs"
    )


def serving(pair: dict[str, bytes]) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pair["tls.crt"])


async def test_a_first_run_makes_the_pair_and_every_webhook_trusts_its_ca(tmp_path: Path) -> None:
    kube = FakeKube()
    pair = await CertificateKeeper(kube, settings(tmp_path)).ensure(NOW)  # type: ignore[arg-type]
    cert = serving(pair)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "bundle-operator.ops.svc" in names.get_values_for_type(x509.DNSName)
    assert cert.not_valid_after_utc - NOW > VALIDITY - datetime.timedelta(days=1)
    ca = x509.load_pem_x509_certificate(pair["ca.crt"])
    cert.verify_directly_issued_by(ca)
    stored = kube.secrets["bundle-operator-webhook-tls"]
    assert stored["type"] == "kubernetes.io/tls"
    assert base64.b64decode(stored["data"]["tls.key"]) == pair["tls.key"]
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == pair["tls.crt"]
    assert oct((tmp_path / "certs" / "tls.key").stat().st_mode & 0o777) == "0o600"
    bundles = {w["clientConfig"]["caBundle"] for w in kube.objects[CONFIG]["webhooks"]}
    assert bundles == {base64.b64encode(pair["ca.crt"]).decode()}


async def test_a_second_replica_takes_the_same_pair_and_writes_nothing(tmp_path: Path) -> None:
    kube = FakeKube()
    first = await CertificateKeeper(kube, settings(tmp_path / "a")).ensure(NOW)  # type: ignore[arg-type]
    writes = kube.writes
    second = await CertificateKeeper(kube, settings(tmp_path / "b")).ensure(NOW)  # type: ignore[arg-type]
    assert second == first and kube.writes == writes
    assert (tmp_path / "b" / "certs" / "tls.key").read_bytes() == first["tls.key"]


async def test_it_is_renewed_before_it_expires_and_when_the_service_changes(tmp_path: Path) -> None:
    kube = FakeKube()
    keeper = CertificateKeeper(kube, settings(tmp_path))  # type: ignore[arg-type]
    first = await keeper.ensure(NOW)
    still = await keeper.ensure(NOW + VALIDITY - RENEW_BEFORE - datetime.timedelta(days=1))
    assert still == first
    renewed = await keeper.ensure(NOW + VALIDITY - RENEW_BEFORE + datetime.timedelta(days=1))
    assert renewed["tls.crt"] != first["tls.crt"]
    assert (
        kube.objects[CONFIG]["webhooks"][0]["clientConfig"]["caBundle"]
        == base64.b64encode(renewed["ca.crt"]).decode()
    )
    moved = await CertificateKeeper(kube, settings(tmp_path, "renamed")).ensure(NOW)  # type: ignore[arg-type]
    names = serving(moved).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "renamed.ops.svc" in names.get_values_for_type(x509.DNSName)


async def test_when_two_replicas_renew_at_once_both_keep_the_winners_pair(tmp_path: Path) -> None:
    kube = FakeKube()
    keeper = CertificateKeeper(kube, settings(tmp_path))  # type: ignore[arg-type]
    await keeper.ensure(NOW)
    winner = await keeper.ensure(NOW + VALIDITY)  # renews: the stored pair is the winner's
    kube.conflict_next = True
    later = NOW + VALIDITY + VALIDITY
    # This replica's renewal loses the race: it takes what the Secret holds now.
    kept = await CertificateKeeper(kube, settings(tmp_path / "other")).ensure(later)  # type: ignore[arg-type]
    assert kept == winner


async def test_replicas_starting_together_both_come_up_when_one_trusts_the_ca_first(tmp_path: Path) -> None:
    kube = FakeKube()
    untrusted = copy.deepcopy(kube.objects[CONFIG])
    pair = await CertificateKeeper(kube, settings(tmp_path / "a")).ensure(NOW)  # type: ignore[arg-type]
    # The second replica read the configuration before the first wrote its caBundle.
    trusted = kube.objects[CONFIG]
    kube.objects[CONFIG] = untrusted
    kube.written_meanwhile = [trusted]
    writes = kube.writes
    second = await CertificateKeeper(kube, settings(tmp_path / "b")).ensure(NOW)  # type: ignore[arg-type]
    assert second == pair and kube.writes == writes
    assert kube.objects[CONFIG] == trusted


async def test_an_edit_made_meanwhile_is_kept_and_the_ca_written_on_top(tmp_path: Path) -> None:
    kube = FakeKube()
    edited = copy.deepcopy(kube.objects[CONFIG])
    edited["metadata"]["labels"] = {"team": "platform"}
    kube.written_meanwhile = [edited]
    pair = await CertificateKeeper(kube, settings(tmp_path)).ensure(NOW)  # type: ignore[arg-type]
    config = kube.objects[CONFIG]
    assert config["metadata"]["labels"] == {"team": "platform"}
    bundle = base64.b64encode(pair["ca.crt"]).decode()
    assert [w["clientConfig"]["caBundle"] for w in config["webhooks"]] == [bundle, bundle]


async def test_a_run_of_conflicts_is_an_error_not_a_loop(tmp_path: Path) -> None:
    kube = FakeKube()
    kube.written_meanwhile = [copy.deepcopy(kube.objects[CONFIG]) for _ in range(TRUST_ATTEMPTS)]
    with pytest.raises(KubeError) as raised:
        await CertificateKeeper(kube, settings(tmp_path)).ensure(NOW)  # type: ignore[arg-type]
    assert raised.value.status == 409
