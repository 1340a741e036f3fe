"""Build .mcpb archives for tests: honest ones with zipfile, hostile ones byte by byte.

``write_zip`` writes exactly the headers it is given, so a test can make an entry lie about its
size, claim to be a link or encrypted, or share a name with another, which zipfile would not do.
"""

from __future__ import annotations

import datetime
import io
import json
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs7
from cryptography.x509.oid import NameOID

UNIX = 3
SIG_HEADER = b"MCPB_SIG_V1"
SIG_FOOTER = b"MCPB_SIG_END"


def base_manifest(**changes: Any) -> dict[str, Any]:
    """A valid 0.3 node manifest; ``changes`` replace top-level fields (None removes one)."""
    manifest: dict[str, Any] = {
        "manifest_version": "0.3",
        "name": "weather",
        "display_name": "Weather",
        "version": "1.2.0",
        "description": "Forecasts for a city",
        "author": {"name": "Ann Example", "email": "ann@example.org"},
        "server": {
            "type": "node",
            "entry_point": "server/index.js",
            "mcp_config": {
                "command": "node",
                "args": ["${__dirname}/server/index.js", "--units=${user_config.units}"],
                "env": {"WEATHER_API_KEY": "${user_config.api_key}"},
            },
        },
        "user_config": {
            "api_key": {
                "type": "string",
                "title": "API key",
                "description": "Key for the weather service",
                "sensitive": True,
                "required": True,
            },
            "units": {
                "type": "string",
                "title": "Units",
                "description": "metric or imperial",
                "default": "metric",
            },
        },
    }
    for key, value in changes.items():
        if value is None:
            manifest.pop(key, None)
        else:
            manifest[key] = value
    return manifest


def server(**changes: Any) -> dict[str, Any]:
    """The base manifest's server with ``changes`` applied."""
    srv: dict[str, Any] = json.loads(json.dumps(base_manifest()["server"]))
    srv.update(changes)
    return srv


def mcp_config(**changes: Any) -> dict[str, Any]:
    """The base manifest's server with mcp_config fields replaced (None removes one)."""
    cfg: dict[str, Any] = dict(base_manifest()["server"]["mcp_config"])
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return server(mcp_config=cfg)


DEFAULT_FILES: dict[str, bytes] = {"server/index.js": b"console.log('weather');\n"}


def build(
    path: Path,
    manifest: dict[str, Any] | bytes | None = None,
    files: dict[str, bytes] | None = None,
    modes: dict[str, int] | None = None,
) -> Path:
    """An honest archive written by zipfile, with Unix modes (no file-type bits, as the packer does)."""
    data = manifest if isinstance(manifest, bytes) else json.dumps(manifest or base_manifest()).encode()
    contents = {"manifest.json": data, **(DEFAULT_FILES if files is None else files)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in contents.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.create_system = UNIX
            info.external_attr = ((modes or {}).get(name, 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, body)
    return path


@dataclass
class RawEntry:
    """One entry as ``write_zip`` writes it; sizes and CRC default to the truth about ``data``."""

    name: str | bytes
    data: bytes = b""
    method: int = 8
    external_attr: int = 0o644 << 16
    create_system: int = UNIX
    flags: int = 0
    declared_size: int | None = None
    crc: int | None = None
    compressed: bytes | None = None  # the stored stream, when a test supplies it ready-made


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def write_zip(entries: list[RawEntry], comment: bytes = b"") -> bytes:
    """A zip with exactly these headers (local and central agree unless a test patches the bytes)."""
    out = io.BytesIO()
    central = io.BytesIO()
    for e in entries:
        name = e.name.encode() if isinstance(e.name, str) else e.name
        body = e.compressed
        if body is None:
            body = _deflate(e.data) if e.method == 8 else e.data
        crc = zlib.crc32(e.data) if e.crc is None else e.crc
        usize = len(e.data) if e.declared_size is None else e.declared_size
        offset = out.tell()
        out.write(b"PK\x03\x04")
        out.write(struct.pack("<5H3I2H", 20, e.flags, e.method, 0, 0x21, crc, len(body), usize, len(name), 0))
        out.write(name)
        out.write(body)
        central.write(b"PK\x01\x02")
        central.write(
            struct.pack(
                "<6H3I5H2I",
                (e.create_system << 8) | 20,
                20,
                e.flags,
                e.method,
                0,
                0x21,
                crc,
                len(body),
                usize,
                len(name),
                0,
                0,
                0,
                0,
                e.external_attr,
                offset,
            )
        )
        central.write(name)
    cd = central.getvalue()
    cd_offset = out.tell()
    out.write(cd)
    out.write(b"PK\x05\x06")
    out.write(struct.pack("<4H2IH", 0, 0, len(entries), len(entries), len(cd), cd_offset, len(comment)))
    out.write(comment)
    return out.getvalue()


def manifest_entry(manifest: dict[str, Any] | None = None) -> RawEntry:
    """The manifest as a raw entry."""
    return RawEntry("manifest.json", json.dumps(manifest or base_manifest()).encode())


def honest_entries() -> list[RawEntry]:
    """The entries of the base archive, as raw entries to add hostile ones to."""
    return [manifest_entry(), RawEntry("server/index.js", DEFAULT_FILES["server/index.js"])]


def zero_bomb_stream(mib: int) -> bytes:
    """Raw deflate of ``mib`` MiB of zeros, built from one independent flushed segment repeated."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    return segment * mib + b"\x03\x00"  # a final, empty fixed-Huffman block ends the stream


# --- signing -----------------------------------------------------------------------------------


@dataclass
class Signer:
    """A self-signed certificate and its key."""

    cert: x509.Certificate
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    @property
    def cert_der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)


def make_signer(kind: str = "rsa", common_name: str = "Weather Publisher") -> Signer:
    """A fresh self-signed signer; ``kind`` is ``rsa`` or ``ec``."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    key = rsa.generate_private_key(65537, 2048) if kind == "rsa" else ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example Org"),
        ]
    )
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return Signer(cert, key)


def cms_detached(signer: Signer, content: bytes, digest: hashes.HashAlgorithm | None = None) -> bytes:
    """A detached DER CMS SignedData over ``content``, made by cryptography's own signer."""
    builder = (
        pkcs7.PKCS7SignatureBuilder()
        .set_data(content)
        .add_signer(signer.cert, signer.key, digest or hashes.SHA256())  # type: ignore[arg-type]
    )
    return builder.sign(
        serialization.Encoding.DER, [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Binary]
    )


def signature_block(der: bytes) -> bytes:
    """The block the official signer appends: header, LE length, DER, footer."""
    return SIG_HEADER + struct.pack("<I", len(der)) + der + SIG_FOOTER


def sign_bytes(zip_bytes: bytes, signer: Signer, digest: hashes.HashAlgorithm | None = None) -> bytes:
    """``zip_bytes`` followed by a signature block over them."""
    return zip_bytes + signature_block(cms_detached(signer, zip_bytes, digest))


def raise_comment(signed: bytes, block_len: int) -> bytes:
    """What newer packers do: raise the end record's comment length so it covers the block."""
    out = bytearray(signed)
    eocd = out.rfind(b"PK\x05\x06", 0, len(out) - block_len)
    (comment,) = struct.unpack_from("<H", out, eocd + 20)
    struct.pack_into("<H", out, eocd + 20, comment + block_len)
    return bytes(out)


def link_attr() -> int:
    """External attributes of a Unix symbolic link."""
    return (stat.S_IFLNK | 0o777) << 16
