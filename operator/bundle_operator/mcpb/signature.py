"""Verify the detached CMS (PKCS #7) signature of an .mcpb archive.

``cryptography`` has no public CMS verifier, so the structure is parsed with ``asn1crypto`` and the
math is done with ``cryptography``'s primitives. Signed attributes are hashed exactly as they are
stored: the official signer (node-forge) does not sort them into DER order, and re-encoding them
would break every signature it makes. Trust is not decided here: a signature that matches reports
the certificate's own name and fingerprint, and says plainly what was checked and that nobody
checked that name.

The whole CMS structure is parsed, not only the fields read here: garbage anywhere in it makes the
block invalid. The signer's certificate is not covered by the signature, so on its own an edited
subject would still "verify"; it must therefore be signed either by its own key (self-signed) or
by an issuer certificate carried in the block, or the signature is invalid. That refuses a
certificate issued by a CA whose certificate the packer left out: its name could not be checked
even against its issuer, and the official packer includes the chain it is given.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from asn1crypto import cms, core
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed

SignatureStatus = Literal["unsigned", "signed", "tampered", "invalid"]

NOBODY_CHECKED = (
    "Checked: the signature matches the bundle's bytes, and the certificate is intact (signed by its "
    "own key or by an issuer that came with it). Not checked: trust. The certificate names itself; "
    "nobody checked that this name belongs to whoever made the bundle."
)
UNSIGNED_NOTE = "The bundle is not signed, so there is no way to tell who made it."

DIGESTS: dict[str, type[hashes.HashAlgorithm]] = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
}
# RFC 5652 5.1 and 5.3: the versions SignedData may carry, and the one a SignerInfo must carry for
# each kind of signer identifier. No signature covers these fields, so the reader checks them.
_SIGNED_DATA_VERSIONS = frozenset({1, 3, 4, 5})
_SIGNER_VERSIONS = {"issuer_and_serial_number": 1, "subject_key_identifier": 3}
_RSA_NAMES = {"rsassa_pkcs1v15", "sha256_rsa", "sha384_rsa", "sha512_rsa"}
_ECDSA_NAMES = {"ecdsa", "sha256_ecdsa", "sha384_ecdsa", "sha512_ecdsa"}


@dataclass(frozen=True)
class SignatureResult:
    """What the signature says; ``subject`` and ``fingerprint_sha256`` only when it verified."""

    status: SignatureStatus
    subject: str | None = None
    fingerprint_sha256: str | None = None
    detail: str | None = None  # why it is tampered or invalid, or the plain statement on trust

    @property
    def refuses(self) -> bool:
        """A damaged or non-matching signature refuses the archive."""
        return self.status in ("tampered", "invalid")


UNSIGNED = SignatureResult(status="unsigned", detail=UNSIGNED_NOTE)


class _Invalid(Exception):
    pass


class _Tampered(Exception):
    pass


@dataclass(frozen=True)
class ParsedSignature:
    """The parts of the CMS structure needed once the content digest is known."""

    digest_algorithm: str
    signer: cms.SignerInfo
    certificate: x509.Certificate
    certificate_der: bytes


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def parse(der: bytes) -> ParsedSignature | SignatureResult:
    """Parse the block's DER; returns an ``invalid`` result when it is not a usable CMS signature."""
    try:
        return _parse(der)
    except _Invalid as exc:
        return SignatureResult(status="invalid", detail=str(exc))
    except Exception:
        # Hostile DER reaches two parsers that raise many kinds of errors; each one means the
        # same thing here: damaged, so invalid (never unsigned, never a crash).
        return SignatureResult(status="invalid", detail="the signature block is not a readable CMS structure")


def _parse(der: bytes) -> ParsedSignature:
    info = cms.ContentInfo.load(der, strict=True)
    # asn1crypto parses lazily; .native walks every field, so damage nobody reads still counts.
    info.native  # noqa: B018
    if info["content_type"].native != "signed_data":
        raise _Invalid("the signature block is not CMS SignedData")
    signed = info["content"]
    encap = signed["encap_content_info"]
    if encap["content_type"].native != "data":
        raise _Invalid("the signature covers something other than plain data")
    if not isinstance(encap["content"], core.Void) and encap["content"].native is not None:
        raise _Invalid("the signature is not detached: it carries its own copy of the content")
    signers = list(signed["signer_infos"])
    if len(signers) != 1:
        raise _Invalid(f"the signature has {len(signers)} signers; exactly one is accepted")
    signer = signers[0]
    _check_versions(signed, signer)
    digest_algorithm = signer["digest_algorithm"]["algorithm"].native
    if digest_algorithm not in DIGESTS:
        raise _Invalid(f"digest algorithm {digest_algorithm} is not accepted (SHA-256, 384 or 512)")
    cert = _find_certificate(signed, signer)
    cert_der = cert.dump()
    try:
        certificate = x509.load_der_x509_certificate(cert_der)
    except ValueError:
        raise _Invalid("the signer's certificate cannot be read") from None
    if not _intact(certificate, _carried(signed, cert_der)):
        if certificate.issuer == certificate.subject:
            raise _Invalid("the signer's self-signed certificate does not verify (it was altered)")
        raise _Invalid(
            "the signer's certificate is signed neither by its own key nor by an issuer in the "
            "signature, so it may have been altered"
        )
    return ParsedSignature(digest_algorithm, signer, certificate, cert_der)


def _check_versions(signed: cms.SignedData, signer: cms.SignerInfo) -> None:
    """Refuse a version CMS does not define: a damaged block, however well the rest verifies."""
    version = int(signed["version"])
    if version not in _SIGNED_DATA_VERSIONS:
        raise _Invalid(f"the SignedData version {version} is not one CMS defines (1, 3, 4 or 5)")
    signer_version, sid = int(signer["version"]), signer["sid"].name
    if signer_version != _SIGNER_VERSIONS[sid]:
        raise _Invalid(
            f"the SignerInfo version {signer_version} does not match its signer identifier "
            f"(version {_SIGNER_VERSIONS[sid]} for {sid.replace('_', ' ')})"
        )
    if signer_version == 3 and version < 3:
        raise _Invalid(f"the SignedData version {version} is below its SignerInfo's version 3")


def _carried(signed: cms.SignedData, signer_der: bytes) -> list[x509.Certificate]:
    """The other certificates in the block that ``cryptography`` can read."""
    out = []
    for choice in signed["certificates"]:
        if choice.name != "certificate" or choice.chosen.dump() == signer_der:
            continue
        try:
            out.append(x509.load_der_x509_certificate(choice.chosen.dump()))
        except ValueError:
            continue
    return out


def _intact(certificate: x509.Certificate, carried: list[x509.Certificate]) -> bool:
    """Whether the certificate's own signature verifies with its key or a carried issuer's."""
    issuers = [certificate, *(c for c in carried if c.subject == certificate.issuer)]
    return any(_signed_by(certificate, issuer.public_key()) for issuer in issuers)


def _signed_by(certificate: x509.Certificate, key: object) -> bool:
    tbs, value = certificate.tbs_certificate_bytes, certificate.signature
    algorithm = certificate.signature_hash_algorithm
    try:
        if isinstance(key, rsa.RSAPublicKey) and algorithm is not None:
            pad = certificate.signature_algorithm_parameters
            if not isinstance(pad, padding.PKCS1v15 | padding.PSS):
                return False
            key.verify(value, tbs, pad, algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey) and algorithm is not None:
            key.verify(value, tbs, ec.ECDSA(algorithm))
        elif isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
            key.verify(value, tbs)
        else:
            return False
    except (InvalidSignature, ValueError, TypeError, UnsupportedAlgorithm):
        return False
    return True


def _find_certificate(signed: cms.SignedData, signer: cms.SignerInfo) -> cms.Certificate:
    sid = signer["sid"]
    certs = [c.chosen for c in signed["certificates"] if c.name == "certificate"]
    for cert in certs:
        if sid.name == "issuer_and_serial_number":
            wanted = sid.chosen
            if cert.issuer == wanted["issuer"] and cert.serial_number == wanted["serial_number"].native:
                return cert
        elif sid.name == "subject_key_identifier" and cert.key_identifier == sid.chosen.native:
            return cert
    raise _Invalid("the signer's certificate is not in the signature")


def verify(parsed: ParsedSignature, content_digest: bytes) -> SignatureResult:
    """Check the signature against the digest of the signed bytes."""
    try:
        return _verify(parsed, content_digest)
    except _Tampered:
        return SignatureResult(
            status="tampered", detail="the signature does not match what was signed (altered after signing)"
        )
    except _Invalid as exc:
        return SignatureResult(status="invalid", detail=str(exc))
    except Exception:  # as in parse: anything else from hostile input means damaged
        return SignatureResult(status="invalid", detail="the signature's structure cannot be used")


def _verify(parsed: ParsedSignature, content_digest: bytes) -> SignatureResult:
    signer = parsed.signer
    hash_cls = DIGESTS[parsed.digest_algorithm]
    attrs = signer["signed_attrs"]
    if isinstance(attrs, core.Void):
        signed_message = content_digest
        prehashed = True
    else:
        message_digest = _signed_attributes(attrs)
        if message_digest != content_digest:
            return SignatureResult(
                status="tampered", detail="the archive's bytes do not match the digest that was signed"
            )
        # As stored, with the SET tag put back in place of the [0] IMPLICIT tag.
        raw = attrs.contents
        signed_message = b"\x31" + _der_length(len(raw)) + raw
        prehashed = False
    _check_signature(parsed, hash_cls, signed_message, prehashed)
    fingerprint = hashlib.sha256(parsed.certificate_der).hexdigest()
    return SignatureResult(
        status="signed",
        subject=parsed.certificate.subject.rfc4514_string(),
        fingerprint_sha256=fingerprint,
        detail=NOBODY_CHECKED,
    )


def _signed_attributes(attrs: cms.CMSAttributes) -> bytes:
    seen: set[str] = set()
    message_digest: bytes | None = None
    content_type: str | None = None
    for attr in attrs:
        kind = attr["type"].native
        if kind in seen:
            raise _Invalid(f"signed attribute {kind} appears twice")
        seen.add(kind)
        values = list(attr["values"])
        if kind in ("message_digest", "content_type") and len(values) != 1:
            raise _Invalid(f"signed attribute {kind} must have exactly one value")
        if kind == "message_digest":
            message_digest = values[0].native
        elif kind == "content_type":
            content_type = values[0].native
    if content_type != "data":
        raise _Invalid("the signed attributes do not say the content is plain data")
    if message_digest is None:
        raise _Invalid("the signed attributes carry no message digest")
    return message_digest


def _check_signature(
    parsed: ParsedSignature, hash_cls: type[hashes.HashAlgorithm], message: bytes, prehashed: bool
) -> None:
    algorithm = parsed.signer["signature_algorithm"]
    name = algorithm["algorithm"].native
    signature = parsed.signer["signature"].native
    key = parsed.certificate.public_key()
    if name not in ("rsassa_pkcs1v15", "ecdsa", "rsassa_pss"):
        embedded = name.split("_", 1)[0]
        if embedded != parsed.digest_algorithm:
            raise _Invalid(f"signature algorithm {name} disagrees with digest {parsed.digest_algorithm}")
    chosen: hashes.HashAlgorithm | Prehashed = Prehashed(hash_cls()) if prehashed else hash_cls()
    try:
        if name in _RSA_NAMES or name == "rsassa_pss":
            if not isinstance(key, rsa.RSAPublicKey):
                raise _Invalid("the signature algorithm is RSA but the certificate's key is not")
            key.verify(signature, message, _rsa_padding(algorithm, hash_cls), chosen)
        elif name in _ECDSA_NAMES:
            if not isinstance(key, ec.EllipticCurvePublicKey):
                raise _Invalid("the signature algorithm is ECDSA but the certificate's key is not")
            key.verify(signature, message, ec.ECDSA(chosen))
        else:
            raise _Invalid(f"signature algorithm {name} is not accepted (RSA or ECDSA)")
    except InvalidSignature:
        raise _Tampered() from None


def _rsa_padding(
    algorithm: cms.SignedDigestAlgorithm, hash_cls: type[hashes.HashAlgorithm]
) -> padding.AsymmetricPadding:
    if algorithm["algorithm"].native != "rsassa_pss":
        return padding.PKCS1v15()
    params = algorithm["parameters"]
    if params["hash_algorithm"]["algorithm"].native != hash_cls().name:
        raise _Invalid("the RSA-PSS hash disagrees with the digest algorithm")
    mgf = params["mask_gen_algorithm"]
    mgf_hash = mgf["parameters"]["algorithm"].native
    if mgf["algorithm"].native != "mgf1" or mgf_hash not in DIGESTS:
        raise _Invalid("the RSA-PSS mask generation is not MGF1 with SHA-2")
    return padding.PSS(mgf=padding.MGF1(DIGESTS[mgf_hash]()), salt_length=params["salt_length"].native)
