"""The webhook's serving certificate when cert-manager does not provide it: made by the operator.

Every replica keeps the same pair: a CA and a serving certificate for the webhook's Service, in
one Secret the chart lets only the operator update (RBAC by resourceNames). A replica that finds
the Secret missing, unreadable, for another Service or within ``RENEW_BEFORE`` of its expiry
writes a new pair (a resourceVersion precondition makes one replica win; the others take its
pair), writes ``tls.crt`` and ``tls.key`` where the server reloads them, and patches the CA into
every webhook of the ValidatingWebhookConfiguration. The private key lives only in the Secret and
the replica's certificate directory.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bundle_operator.k8s.kube import Kube, KubeError

log = logging.getLogger(__name__)

VALIDITY = datetime.timedelta(days=365)
# Renewed this long before it expires: every replica checks every CHECK_SECONDS.
RENEW_BEFORE = datetime.timedelta(days=30)
CHECK_SECONDS = 60.0
TRUST_ATTEMPTS = 5  # reads and writes of the caBundle before a run of conflicts is an error
CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@dataclass(frozen=True)
class CertificateSettings:
    """Where the pair is kept and for which Service and webhook configuration."""

    namespace: str
    secret: str
    service: str
    configuration: str
    cert_dir: Path


def dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may reach the Service by."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_pair(service: str, namespace: str, now: datetime.datetime) -> dict[str, bytes]:
    """A new CA and a serving certificate it issued for the Service: ``ca.crt``, ``tls.crt``, ``tls.key``."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    # A common name holds at most 64 characters; clients check the DNS names, not it.
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"webhook CA {service}"[:64])])
    start, end = now - datetime.timedelta(minutes=5), now + VALIDITY
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    names = dns_names(service, namespace)
    serving = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, service[:64])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    return {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "tls.crt": serving.public_bytes(serialization.Encoding.PEM),
        "tls.key": _pem(key),
    }


def renewal_reason(
    pair: dict[str, bytes], service: str, namespace: str, now: datetime.datetime
) -> str | None:
    """Why ``pair`` must be replaced (missing, unreadable, another Service, expiring), or None."""
    if not all(pair.get(k) for k in ("ca.crt", "tls.crt", "tls.key")):
        return "there is none yet"
    try:
        serving = x509.load_pem_x509_certificate(pair["tls.crt"])
        x509.load_pem_x509_certificate(pair["ca.crt"])
        serialization.load_pem_private_key(pair["tls.key"], password=None)
        names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound):
        return "the stored one cannot be read"
    if sorted(names.get_values_for_type(x509.DNSName)) != sorted(dns_names(service, namespace)):
        return "the stored one is for another Service"
    if serving.not_valid_after_utc - now < RENEW_BEFORE:
        return f"the stored one expires at {serving.not_valid_after_utc:%Y-%m-%d %H:%M} UTC"
    return None


def _stored_pair(secret: dict[str, Any] | None) -> dict[str, bytes]:
    return {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}


class CertificateKeeper:
    """Keeps the pair in the Secret, in the certificate directory and in the configuration's caBundle."""

    def __init__(self, kube: Kube, settings: CertificateSettings) -> None:
        self.kube = kube
        self.settings = settings

    async def ensure(self, now: datetime.datetime | None = None) -> dict[str, bytes]:
        """One round: the current pair, renewed when due, on disk and trusted by the configuration."""
        s = self.settings
        now = now or datetime.datetime.now(datetime.UTC)
        secret = await self.kube.read_secret(s.namespace, s.secret)
        pair = _stored_pair(secret)
        reason = renewal_reason(pair, s.service, s.namespace, now)
        if reason is not None:
            pair = await self._renew(secret, reason, now)
        self._write_files(pair)
        await self._trust(pair["ca.crt"])
        return pair

    async def _renew(
        self, secret: dict[str, Any] | None, reason: str, now: datetime.datetime
    ) -> dict[str, bytes]:
        s = self.settings
        pair = make_pair(s.service, s.namespace, now)
        metadata: dict[str, Any] = {"name": s.secret, "namespace": s.namespace}
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": metadata,
            "data": {k: base64.b64encode(v).decode() for k, v in pair.items()},
        }
        try:
            if secret is None:
                await self.kube.create_secret(s.namespace, body)
            else:
                metadata["resourceVersion"] = secret["metadata"]["resourceVersion"]
                metadata["labels"] = secret["metadata"].get("labels") or {}
                await self.kube.replace_secret(s.namespace, s.secret, body)
        except KubeError as exc:
            if exc.status != 409:
                raise
            # Another replica renewed first: use its pair.
            won = await self.kube.read_secret(s.namespace, s.secret)
            return _stored_pair(won)
        log.info("made a new webhook certificate in Secret %s/%s: %s", s.namespace, s.secret, reason)
        return pair

    def _write_files(self, pair: dict[str, bytes]) -> None:
        directory = self.settings.cert_dir
        directory.mkdir(parents=True, exist_ok=True)
        # The key first: the server reloads when either file changes and loads both together.
        for name in ("tls.key", "tls.crt"):
            path = directory / name
            if path.exists() and path.read_bytes() == pair[name]:
                continue
            temporary = directory / f".{name}.new"
            temporary.write_bytes(pair[name])
            os.chmod(temporary, 0o600)
            temporary.replace(path)

    async def _trust(self, ca: bytes) -> None:
        name = self.settings.configuration
        path = f"{CONFIGURATIONS}/{name}"
        bundle = base64.b64encode(ca).decode()
        for attempt in range(TRUST_ATTEMPTS):
            config = await self.kube.read(path)
            if config is None:
                log.warning("no ValidatingWebhookConfiguration %s to give the CA to", name)
                return
            webhooks = config.get("webhooks") or []
            if all((w.get("clientConfig") or {}).get("caBundle") == bundle for w in webhooks):
                return
            for w in webhooks:
                w.setdefault("clientConfig", {})["caBundle"] = bundle
            try:
                # Its resourceVersion makes a concurrent edit fail, not vanish.
                await self.kube.replace(path, config)
                return
            except KubeError as exc:
                # Replicas starting together each write the same caBundle: the loser reads again,
                # finds it there (or an edit from someone else) and is done or writes on top.
                if exc.status != 409 or attempt == TRUST_ATTEMPTS - 1:
                    raise

    async def follow(self, every: float = CHECK_SECONDS) -> None:
        """Check again every ``every`` seconds; a failed round is logged and tried again."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.ensure()
            except (KubeError, OSError) as exc:
                log.warning("could not check the webhook certificate: %s", exc)
