"""The certificates and keys of a dev cluster: one CA, serving and client certificates, SA keys.

Every key is ECDSA P-256: generated in a millisecond, and accepted by kube-apiserver for TLS,
client certificates and service-account tokens (ES256) alike.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = datetime.timedelta(days=365)
# Clocks of a test machine may be a little behind; a certificate valid from "now" could be refused.
BACKDATE = datetime.timedelta(hours=1)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class CertKey:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class ClusterPKI:
    """All the credentials one dev cluster needs, in memory."""

    ca: CertKey
    apiserver: CertKey
    controller_manager_serving: CertKey
    admin: CertKey
    controller_manager: CertKey
    front_proxy_ca: CertKey
    front_proxy_client: CertKey
    service_account_key_pem: bytes
    service_account_public_pem: bytes


@dataclass(frozen=True)
class PKIFiles:
    """Where `ClusterPKI.write` put each file."""

    ca_cert: Path
    ca_key: Path
    apiserver_cert: Path
    apiserver_key: Path
    controller_manager_serving_cert: Path
    controller_manager_serving_key: Path
    admin_cert: Path
    admin_key: Path
    front_proxy_ca_cert: Path
    front_proxy_client_cert: Path
    front_proxy_client_key: Path
    service_account_key: Path
    service_account_public: Path


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    # Every key here signs (ECDSA); only a CA's signs certificates and CRLs.
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _new_ca(common_name: str) -> tuple[CertKey, ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertKey(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)), key, cert


def _issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    dns_names: tuple[str, ...] = (),
    ips: tuple[IPAddress, ...] = (),
) -> CertKey:
    key = _new_key()
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if dns_names or ips:
        names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
        names += [x509.IPAddress(ip) for ip in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return CertKey(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def loopback_serving(ca_name: str) -> tuple[CertKey, CertKey]:
    """A fresh CA, and a serving certificate it issued for localhost and 127.0.0.1."""
    ca, ca_key, ca_cert = _new_ca(ca_name)
    server = _issue(
        ca_key,
        ca_cert,
        _name("localhost"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        ("localhost",),
        (ipaddress.ip_address("127.0.0.1"),),
    )
    return ca, server


def generate(service_ip: str, advertise_address: str) -> ClusterPKI:
    """Make a fresh CA and every certificate and key the control plane and its admin use."""
    ca, ca_key, ca_cert = _new_ca("bundle-operator-devcluster-ca")
    # A CA of its own for the aggregation layer, as kubeadm sets it up: the apiserver proxies to
    # extension apiservers with this client certificate, and delegating components (the
    # controller manager among them) read its CA from extension-apiserver-authentication.
    front_proxy_ca, front_proxy_key, front_proxy_cert = _new_ca("bundle-operator-devcluster-front-proxy-ca")
    loopback: tuple[IPAddress, ...] = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))
    apiserver_names = (
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    )
    apiserver_ips = (*loopback, ipaddress.ip_address(service_ip), ipaddress.ip_address(advertise_address))
    serving = ExtendedKeyUsageOID.SERVER_AUTH
    client = ExtendedKeyUsageOID.CLIENT_AUTH
    sa_key = _new_key()
    return ClusterPKI(
        ca=ca,
        apiserver=_issue(ca_key, ca_cert, _name("kube-apiserver"), serving, apiserver_names, apiserver_ips),
        controller_manager_serving=_issue(
            ca_key, ca_cert, _name("kube-controller-manager"), serving, ("localhost",), loopback
        ),
        # system:masters is the group RBAC always authorizes: the cluster's superuser.
        admin=_issue(ca_key, ca_cert, _name("devcluster-admin", "system:masters"), client),
        # The user the bootstrap RBAC policy grants the controller manager's own role.
        controller_manager=_issue(ca_key, ca_cert, _name("system:kube-controller-manager"), client),
        front_proxy_ca=front_proxy_ca,
        front_proxy_client=_issue(front_proxy_key, front_proxy_cert, _name(FRONT_PROXY_CLIENT), client),
        service_account_key_pem=_key_pem(sa_key),
        service_account_public_pem=sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )


def write(pki: ClusterPKI, directory: Path) -> PKIFiles:
    """Write every certificate and key into `directory` (private keys readable by the owner only)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = PKIFiles(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        apiserver_cert=directory / "apiserver.crt",
        apiserver_key=directory / "apiserver.key",
        controller_manager_serving_cert=directory / "controller-manager-serving.crt",
        controller_manager_serving_key=directory / "controller-manager-serving.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        front_proxy_ca_cert=directory / "front-proxy-ca.crt",
        front_proxy_client_cert=directory / "front-proxy-client.crt",
        front_proxy_client_key=directory / "front-proxy-client.key",
        service_account_key=directory / "sa.key",
        service_account_public=directory / "sa.pub",
    )
    contents = {
        files.ca_cert: pki.ca.cert_pem,
        files.ca_key: pki.ca.key_pem,
        files.apiserver_cert: pki.apiserver.cert_pem,
        files.apiserver_key: pki.apiserver.key_pem,
        files.controller_manager_serving_cert: pki.controller_manager_serving.cert_pem,
        files.controller_manager_serving_key: pki.controller_manager_serving.key_pem,
        files.admin_cert: pki.admin.cert_pem,
        files.admin_key: pki.admin.key_pem,
        files.front_proxy_ca_cert: pki.front_proxy_ca.cert_pem,
        files.front_proxy_client_cert: pki.front_proxy_client.cert_pem,
        files.front_proxy_client_key: pki.front_proxy_client.key_pem,
        files.service_account_key: pki.service_account_key_pem,
        files.service_account_public: pki.service_account_public_pem,
    }
    for path, data in contents.items():
        path.touch(mode=0o600, exist_ok=True)
        path.write_bytes(data)
    return files
