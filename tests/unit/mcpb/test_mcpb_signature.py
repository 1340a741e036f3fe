"""Signatures: signed, unsigned, tampered, invalid; a damaged signature is never reported as unsigned."""

from __future__ import annotations

import hashlib
import struct

import pytest
from asn1crypto import cms
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.serialization import Encoding, pkcs7

from bundle_operator.mcpb.signature import NOBODY_CHECKED

from .conftest import Inspect
from .craft import (
    SIG_FOOTER,
    SIG_HEADER,
    RawEntry,
    Signer,
    cms_detached,
    honest_entries,
    link_attr,
    make_signer,
    raise_comment,
    sign_bytes,
    signature_block,
    write_zip,
)


@pytest.fixture(scope="module")
def rsa_signer() -> Signer:
    return make_signer("rsa")


@pytest.fixture(scope="module")
def ec_signer() -> Signer:
    return make_signer("ec")


@pytest.fixture(scope="module")
def unsigned() -> bytes:
    return write_zip(honest_entries())


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


@pytest.mark.parametrize("kind", ["rsa", "ec"])
@pytest.mark.parametrize("digest", [hashes.SHA256(), hashes.SHA384(), hashes.SHA512()])
def test_a_matching_signature_reports_the_signer_and_says_nobody_checked_the_name(
    inspect_bytes: Inspect,
    unsigned: bytes,
    rsa_signer: Signer,
    ec_signer: Signer,
    kind: str,
    digest: hashes.HashAlgorithm,
) -> None:
    signer = rsa_signer if kind == "rsa" else ec_signer
    result = inspect_bytes(sign_bytes(unsigned, signer, digest))
    assert result.verdict == "accepted", result.reason
    sig = result.signature
    assert sig is not None and sig.status == "signed"
    assert sig.subject == "O=Example Org,CN=Weather Publisher"
    assert sig.fingerprint_sha256 == hashlib.sha256(signer.cert_der).hexdigest()
    assert sig.detail == NOBODY_CHECKED


def test_an_unsigned_archive_says_so(inspect_bytes: Inspect, unsigned: bytes) -> None:
    sig = inspect_bytes(unsigned).signature
    assert sig is not None
    assert (sig.status, sig.subject, sig.fingerprint_sha256) == ("unsigned", None, None)


def test_the_raised_zip_comment_of_newer_packers_is_subtracted_before_hashing(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    block = signature_block(cms_detached(rsa_signer, unsigned))
    result = inspect_bytes(raise_comment(unsigned + block, len(block)))
    assert result.verdict == "accepted"
    assert result.signature is not None and result.signature.status == "signed"


def test_a_zip_with_its_own_comment_keeps_it_when_the_comment_is_raised(
    inspect_bytes: Inspect, rsa_signer: Signer
) -> None:
    zipped = write_zip(honest_entries(), comment=b"built by hand")
    block = signature_block(cms_detached(rsa_signer, zipped))
    assert inspect_bytes(raise_comment(zipped + block, len(block))).signature.status == "signed"  # type: ignore[union-attr]


@pytest.mark.parametrize("raised", [False, True])
def test_a_changed_byte_in_the_archive_is_tampered(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer, raised: bool
) -> None:
    block = signature_block(cms_detached(rsa_signer, unsigned))
    signed = unsigned + block
    if raised:
        signed = raise_comment(signed, len(block))
    changed = bytearray(signed)
    at = changed.find(b"server/index.js")
    changed[at] ^= 0x20  # 's' -> 'S': still a valid zip, different bytes
    result = inspect_bytes(bytes(changed))
    assert (result.verdict, result.code) == ("refused", "signature_tampered")
    assert result.signature is not None and result.signature.status == "tampered"
    assert result.signature.subject is None


def test_a_changed_signature_value_is_tampered(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    der = bytearray(cms_detached(rsa_signer, unsigned))
    der[-10] ^= 0x01  # inside the RSA signature, the last field of the structure
    result = inspect_bytes(unsigned + signature_block(bytes(der)))
    assert (result.code, result.signature.status) == ("signature_tampered", "tampered")  # type: ignore[union-attr]


def test_a_changed_signed_attribute_is_tampered(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    der = bytearray(cms_detached(rsa_signer, unsigned))
    signing_time_oid = bytes.fromhex("06092a864886f70d010905")
    at = der.find(b"\x17\x0d", der.find(signing_time_oid))  # its UTCTime value, 13 digits
    der[at + 3] = ord("9") if der[at + 3] != ord("9") else ord("8")
    result = inspect_bytes(unsigned + signature_block(bytes(der)))
    assert result.code == "signature_tampered"


def test_signed_attributes_are_hashed_as_stored_not_re_encoded(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    # Like node-forge (the official signer), write the attributes out of DER order and sign them so.
    info = cms.ContentInfo.load(cms_detached(rsa_signer, unsigned))
    signed_data = info["content"]
    signer_info = signed_data["signer_infos"][0]
    items = [a.dump() for a in signer_info["signed_attrs"]]
    body = b"".join(reversed(items))
    assert b"".join(sorted(items)) != body  # the order really is not DER's
    stored = b"\x31" + _der_length(len(body)) + body
    signature = rsa_signer.key.sign(stored, padding.PKCS1v15(), hashes.SHA256())  # type: ignore[call-arg, union-attr]
    with pytest.raises(InvalidSignature):  # a verifier that re-sorted the set would fail here
        sorted_set = b"\x31" + _der_length(len(body)) + b"".join(sorted(items))
        rsa_signer.cert.public_key().verify(signature, sorted_set, padding.PKCS1v15(), hashes.SHA256())  # type: ignore[call-arg, union-attr]
    new_signer = cms.SignerInfo(
        {
            "version": signer_info["version"].native,
            "sid": signer_info["sid"],
            "digest_algorithm": signer_info["digest_algorithm"],
            "signed_attrs": cms.CMSAttributes.load(stored),
            "signature_algorithm": signer_info["signature_algorithm"],
            "signature": signature,
        }
    )
    new_data = cms.SignedData(
        {
            "version": signed_data["version"].native,
            "digest_algorithms": signed_data["digest_algorithms"],
            "encap_content_info": signed_data["encap_content_info"],
            "certificates": signed_data["certificates"],
            "signer_infos": [new_signer],
        }
    )
    der = cms.ContentInfo({"content_type": "signed_data", "content": new_data}).dump()
    assert body in der
    result = inspect_bytes(unsigned + signature_block(der))
    assert result.signature is not None and result.signature.status == "signed"


def test_a_signature_without_signed_attributes_is_verified(
    inspect_bytes: Inspect, unsigned: bytes, ec_signer: Signer
) -> None:
    der = (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(unsigned)
        .add_signer(ec_signer.cert, ec_signer.key, hashes.SHA384())  # type: ignore[arg-type]
        .sign(
            Encoding.DER,
            [
                pkcs7.PKCS7Options.DetachedSignature,
                pkcs7.PKCS7Options.NoAttributes,
                pkcs7.PKCS7Options.Binary,
            ],
        )
    )
    assert cms.ContentInfo.load(der)["content"]["signer_infos"][0]["signed_attrs"].native is None
    ok = inspect_bytes(unsigned + signature_block(der))
    assert ok.signature is not None and ok.signature.status == "signed"
    changed = bytearray(unsigned)
    changed[changed.find(b"server/index.js")] ^= 0x20
    assert inspect_bytes(bytes(changed) + signature_block(der)).code == "signature_tampered"


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda der: der[:-40], "not a readable CMS structure"),
        (lambda der: b"\x30\x03\x02\x01\x01", "not a readable CMS structure"),
        (lambda der: b"definitely not DER at all", "not a readable CMS structure"),
    ],
)
def test_an_unreadable_signature_is_invalid_not_unsigned(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer, mutate: object, fragment: str
) -> None:
    der = mutate(cms_detached(rsa_signer, unsigned))  # type: ignore[operator]
    result = inspect_bytes(unsigned + signature_block(der))
    assert (result.verdict, result.code) == ("refused", "signature_invalid")
    assert result.signature is not None and result.signature.status == "invalid"
    assert fragment in (result.signature.detail or "")


def test_an_embedded_non_detached_signature_is_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    der = (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(unsigned)
        .add_signer(rsa_signer.cert, rsa_signer.key, hashes.SHA256())  # type: ignore[arg-type]
        .sign(Encoding.DER, [pkcs7.PKCS7Options.Binary])
    )
    result = inspect_bytes(unsigned + signature_block(der))
    assert result.code == "signature_invalid"
    assert "not detached" in (result.reason or "")


def test_two_signers_are_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer, ec_signer: Signer
) -> None:
    der = (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(unsigned)
        .add_signer(rsa_signer.cert, rsa_signer.key, hashes.SHA256())  # type: ignore[arg-type]
        .add_signer(ec_signer.cert, ec_signer.key, hashes.SHA256())  # type: ignore[arg-type]
        .sign(Encoding.DER, [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary])
    )
    assert inspect_bytes(unsigned + signature_block(der)).code == "signature_invalid"


def test_a_weak_digest_is_invalid(inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer) -> None:
    der = cms_detached(rsa_signer, unsigned)
    sha256_oid = bytes.fromhex("0609608648016503040201")
    sha1_oid = bytes.fromhex("06052b0e03021a")
    # Only the signer's own digest algorithm needs to say SHA-1 for the reader to refuse it.
    info = cms.ContentInfo.load(der)
    signer_info = info["content"]["signer_infos"][0]
    assert sha256_oid in signer_info["digest_algorithm"].dump()
    weak = der.replace(signer_info["digest_algorithm"].dump(), bytes.fromhex("3007") + sha1_oid, 1)
    assert weak != der
    result = inspect_bytes(unsigned + signature_block(weak))
    assert result.code == "signature_invalid"


def test_a_signature_whose_certificate_is_missing_is_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    other = make_signer("rsa", "Someone Else")
    info = cms.ContentInfo.load(cms_detached(rsa_signer, unsigned))
    signed_data = info["content"]
    swapped = cms.SignedData(
        {
            "version": signed_data["version"].native,
            "digest_algorithms": signed_data["digest_algorithms"],
            "encap_content_info": signed_data["encap_content_info"],
            "certificates": [
                cms.CertificateChoices.load(
                    cms.CertificateChoices({"certificate": cms.Certificate.load(other.cert_der)}).dump()
                )
            ],
            "signer_infos": signed_data["signer_infos"],
        }
    )
    der = cms.ContentInfo({"content_type": "signed_data", "content": swapped}).dump()
    result = inspect_bytes(unsigned + signature_block(der))
    assert result.code == "signature_invalid"
    assert "certificate is not in the signature" in (result.reason or "")


def test_a_footer_without_a_sound_block_is_invalid(inspect_bytes: Inspect, unsigned: bytes) -> None:
    result = inspect_bytes(unsigned + b"garbage" + SIG_FOOTER)
    assert (result.code, result.signature.status) == ("signature_invalid", "invalid")  # type: ignore[union-attr]


def test_a_wrong_length_field_is_invalid(inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer) -> None:
    der = cms_detached(rsa_signer, unsigned)
    block = SIG_HEADER + struct.pack("<I", len(der) + 5) + der + SIG_FOOTER
    assert inspect_bytes(unsigned + block).code == "signature_invalid"


def test_a_block_cut_short_is_invalid_never_unsigned(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    block = signature_block(cms_detached(rsa_signer, unsigned))
    for cut in (len(SIG_FOOTER), len(SIG_FOOTER) + 100, len(block) - len(SIG_HEADER) - 2):
        result = inspect_bytes(unsigned + block[:-cut])
        assert result.verdict == "refused"
        assert result.signature is not None and result.signature.status == "invalid", cut


def test_a_signer_name_containing_the_marker_does_not_confuse_the_reader(
    inspect_bytes: Inspect, unsigned: bytes
) -> None:
    signer = make_signer("ec", "MCPB_SIG_V1 MCPB_SIG_END")
    result = inspect_bytes(sign_bytes(unsigned, signer))
    assert result.signature is not None and result.signature.status == "signed"
    assert "MCPB_SIG_V1" in (result.signature.subject or "")


def test_a_signed_archive_that_breaks_a_rule_is_still_refused(
    inspect_bytes: Inspect, rsa_signer: Signer
) -> None:
    zipped = write_zip(
        [*honest_entries(), RawEntry("server/link", b"/etc", method=0, external_attr=link_attr())]
    )
    result = inspect_bytes(sign_bytes(zipped, rsa_signer))
    assert (result.verdict, result.code) == ("refused", "entry_link")
    assert result.signature is not None and result.signature.status == "signed"


def test_an_altered_self_signed_certificate_is_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    # The certificate is not covered by the signature: renaming it must not pass as "signed".
    der = cms_detached(rsa_signer, unsigned)
    renamed = der.replace(b"Weather Publisher", b"Weather Publishes")
    assert renamed != der
    result = inspect_bytes(unsigned + signature_block(renamed))
    assert (result.code, result.signature.status) == ("signature_invalid", "invalid")  # type: ignore[union-attr]


def test_a_certificate_whose_subject_was_edited_is_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    # Only the subject changes (the issuer keeps the old name), so the certificate no longer claims
    # to be self-signed, and the signature over the bundle still matches its key.
    der = cms_detached(rsa_signer, unsigned)
    issuer_at = der.index(b"Weather Publisher")
    subject_at = der.index(b"Weather Publisher", issuer_at + 1)
    edited = der[:subject_at] + b"Anthropic PBC Inc" + der[subject_at + 17 :]
    result = inspect_bytes(unsigned + signature_block(edited))
    assert (result.verdict, result.code) == ("refused", "signature_invalid")
    assert result.signature is not None
    assert (result.signature.status, result.signature.subject) == ("invalid", None)


def test_damage_in_fields_nobody_reads_makes_the_signature_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    der = bytearray(cms_detached(rsa_signer, unsigned))
    at = der.index(b"\x02\x01\x01\x31")  # SignedData version 1, then the digestAlgorithms SET
    der[at + 2 : at + 4] = b"\x2b\x0b"  # garbage where the SET starts
    result = inspect_bytes(unsigned + signature_block(bytes(der)))
    assert (result.verdict, result.code) == ("refused", "signature_invalid")
    assert result.signature is not None and result.signature.status == "invalid"


@pytest.mark.parametrize("version", [b"\xfe", b"\x00", b"\x02", b"\x06"])
def test_a_signed_data_version_cms_does_not_define_is_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer, version: bytes
) -> None:
    # The version is outside what the signature covers, so only the reader can notice the damage.
    der = bytearray(cms_detached(rsa_signer, unsigned))
    at = der.index(b"\x02\x01\x01\x31")  # SignedData version 1, then the digestAlgorithms SET
    der[at + 2 : at + 3] = version
    result = inspect_bytes(unsigned + signature_block(bytes(der)))
    assert (result.verdict, result.code) == ("refused", "signature_invalid")
    assert result.signature is not None
    assert (result.signature.status, result.signature.subject) == ("invalid", None)
    assert "SignedData version" in (result.reason or "")


@pytest.mark.parametrize("version", [b"\xfe", b"\x00", b"\x03"])
def test_a_signer_info_version_that_disagrees_with_its_identifier_is_invalid(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer, version: bytes
) -> None:
    der = bytearray(cms_detached(rsa_signer, unsigned))
    signer_info = cms.ContentInfo.load(bytes(der))["content"]["signer_infos"][0]
    assert signer_info["sid"].name == "issuer_and_serial_number"  # so its version must be 1
    raw = signer_info.dump()
    at = der.index(raw) + len(raw) - len(signer_info.contents)  # where its first field starts
    assert der[at : at + 3] == b"\x02\x01\x01"
    der[at + 2 : at + 3] = version
    result = inspect_bytes(unsigned + signature_block(bytes(der)))
    assert (result.verdict, result.code) == ("refused", "signature_invalid")
    assert result.signature is not None and result.signature.status == "invalid"
    assert "SignerInfo version" in (result.reason or "")


def test_a_certificate_issued_by_a_ca_carried_in_the_block_is_signed(
    inspect_bytes: Inspect, unsigned: bytes
) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding as Enc
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    now = datetime.datetime.now(datetime.UTC)
    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())

    def cert(
        subject: str, issuer: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey
    ) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(signer, hashes.SHA256())
        )

    ca = cert("Example CA", "Example CA", ca_key, ca_key)
    leaf = cert("Weather Publisher", "Example CA", leaf_key, ca_key)
    options = [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary]
    builder = pkcs7.PKCS7SignatureBuilder().set_data(unsigned).add_signer(leaf, leaf_key, hashes.SHA256())
    with_ca = builder.add_certificate(ca).sign(Enc.DER, options)
    result = inspect_bytes(unsigned + signature_block(with_ca))
    assert result.signature is not None
    assert (result.verdict, result.signature.status, result.signature.subject) == (
        "accepted",
        "signed",
        "CN=Weather Publisher",
    )
    # Without its issuer, nothing shows the certificate is the one the CA made.
    alone = builder.sign(Enc.DER, options)
    result = inspect_bytes(unsigned + signature_block(alone))
    assert result.signature is not None and result.signature.status == "invalid"


def test_a_signed_bundle_says_plainly_what_was_checked(
    inspect_bytes: Inspect, unsigned: bytes, rsa_signer: Signer
) -> None:
    result = inspect_bytes(sign_bytes(unsigned, rsa_signer))
    assert result.signature is not None and result.signature.status == "signed"
    assert "Checked: the signature matches the bundle's bytes" in (result.signature.detail or "")
    assert "Not checked: trust" in (result.signature.detail or "")
