"""Archives made by the official tools: `mcpb pack` and `mcpb sign` (npm), and `openssl cms`.

The npm CLI is pinned by tests/tools/mcpb's lock file and installed into the cache with the cached
Node and npm (`make mcpb-tools`, or on first use here). bundlectl runs as a separate process, as a
user runs it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import struct
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from asn1crypto import cms
from cryptography import x509
from tests.fixtures.mcpb_servers.build import mcpb_executable

from bundle_operator.document import parse_bundle_text

REPO = Path(__file__).resolve().parents[3]
SIG_HEADER, SIG_FOOTER = b"MCPB_SIG_V1", b"MCPB_SIG_END"

pytestmark = pytest.mark.integration

MANIFEST: dict[str, Any] = {
    "manifest_version": "0.3",
    "name": "notes",
    "display_name": "Notes",
    "version": "0.4.1",
    "description": "Keeps notes in a folder",
    "author": {"name": "Ann Example", "email": "ann@example.org"},
    "server": {
        "type": "node",
        "entry_point": "server/index.js",
        "mcp_config": {
            "command": "node",
            "args": ["${__dirname}/server/index.js", "--dir=${user_config.notes_dir}"],
            "env": {"NOTES_TOKEN": "${user_config.token}", "NODE_PATH": "${__dirname}/server/lib"},
        },
    },
    "user_config": {
        "token": {"type": "string", "title": "Token", "description": "Sync token", "sensitive": True},
        "notes_dir": {
            "type": "directory",
            "title": "Notes folder",
            "description": "Where notes live",
            "default": "${DOCUMENTS}/notes",
            "required": True,
        },
    },
    "compatibility": {"platforms": ["linux", "darwin"], "runtimes": {"node": ">=18.0.0"}},
}


def _run(*argv: str | Path, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, check=check, capture_output=True, text=True)


def bundlectl(*argv: str | Path) -> tuple[int, str, str]:
    done = _run(sys.executable, "-m", "bundle_operator.cli", *argv, check=False)
    return done.returncode, done.stdout, done.stderr


def inspect_json(path: Path, platform: str = "linux") -> tuple[int, dict[str, Any]]:
    code, out, err = bundlectl("mcpb", "inspect", path, "--platform", platform, "-o", "json")
    assert out, err
    return code, json.loads(out)


@pytest.fixture(scope="module")
def mcpb_cli() -> Path:
    cli = mcpb_executable()
    assert _run(cli, "--version").stdout.strip() == "2.1.2"
    return cli


@dataclass
class Keys:
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcpb")


@pytest.fixture(scope="module")
def rsa_keys(work: Path) -> Keys:
    cert, key = work / "rsa-cert.pem", work / "rsa-key.pem"
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-keyout", key,
         "-out", cert, "-subj", "/CN=Notes Publisher/O=Example Org/C=NL")  # fmt: skip
    return Keys(cert, key)


@pytest.fixture(scope="module")
def ec_keys(work: Path) -> Keys:
    cert, key = work / "ec-cert.pem", work / "ec-key.pem"
    _run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    _run("openssl", "req", "-x509", "-new", "-key", key, "-days", "30", "-out", cert,
         "-subj", "/CN=Notes EC Publisher/O=Example Org")  # fmt: skip
    return Keys(cert, key)


@pytest.fixture(scope="module")
def packed(mcpb_cli: Path, work: Path) -> Path:
    src = work / "notes-src"
    (src / "server" / "lib").mkdir(parents=True)
    (src / "manifest.json").write_text(json.dumps(MANIFEST, indent=2))
    (src / "server" / "index.js").write_text("console.log('notes');\n")
    (src / "server" / "lib" / "store.js").write_text("module.exports = {};\n")
    helper = src / "server" / "sync.sh"
    helper.write_text("#!/bin/sh\necho sync\n")
    helper.chmod(0o755)
    out = work / "notes.mcpb"
    _run(mcpb_cli, "pack", src, out)
    return out


@pytest.fixture
def copy(packed: Path, tmp_path: Path) -> Iterator[Path]:
    target = tmp_path / "notes.mcpb"
    shutil.copyfile(packed, target)
    yield target


def _fingerprint(cert: Path) -> str:
    out = _run("openssl", "x509", "-in", cert, "-noout", "-fingerprint", "-sha256").stdout
    return out.strip().split("=", 1)[1].replace(":", "").lower()


def _subject(cert: Path) -> str:
    return x509.load_pem_x509_certificate(cert.read_bytes()).subject.rfc4514_string()


def _append_block(archive: Path, der: bytes) -> None:
    with archive.open("ab") as f:
        f.write(SIG_HEADER + struct.pack("<I", len(der)) + der + SIG_FOOTER)


def _openssl_sign(archive: Path, keys: Keys, *options: str) -> bytes:
    der = archive.with_suffix(".p7s")
    _run("openssl", "cms", "-sign", "-binary", "-in", archive, "-signer", keys.cert, "-inkey", keys.key,
         "-outform", "DER", "-out", der, *options)  # fmt: skip
    return der.read_bytes()


def test_an_archive_packed_by_the_official_cli_is_accepted(packed: Path) -> None:
    with zipfile.ZipFile(packed) as zf:
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
    # The packer writes permission bits only; the reader must take these for regular files.
    assert all(stat.S_IFMT(mode) == 0 for mode in modes.values()), modes
    code, report = inspect_json(packed)
    assert code == 0
    assert (report["verdict"], report["code"]) == ("accepted", None)
    assert report["sha256"] == hashlib.sha256(packed.read_bytes()).hexdigest()
    assert report["signature"] == {"status": "unsigned", "subject": None, "fingerprint_sha256": None}
    assert report["manifest"]["platforms"] == ["linux", "darwin"]
    assert report["manifest"]["env"]["NODE_PATH"] == "${__dirname}/server/lib"
    assert report["setup"] == [
        {"key": "token", "label": "Token", "type": "secret", "required": False, "sensitive": True},
        {"key": "notes_dir", "label": "Notes folder", "type": "string", "required": True, "sensitive": False},
    ]


def test_the_platform_list_is_honoured(packed: Path) -> None:
    code, report = inspect_json(packed, platform="win32")
    assert (code, report["code"]) == (1, "platform")


def test_a_self_signed_official_signature_is_verified(mcpb_cli: Path, copy: Path, rsa_keys: Keys) -> None:
    _run(mcpb_cli, "sign", copy, "--cert", rsa_keys.cert, "--key", rsa_keys.key)
    data = copy.read_bytes()
    assert data.endswith(SIG_FOOTER)
    code, report = inspect_json(copy)
    assert code == 0
    assert report["signature"] == {
        "status": "signed",
        "subject": _subject(rsa_keys.cert),
        "fingerprint_sha256": _fingerprint(rsa_keys.cert),
    }
    _, text, _ = bundlectl("mcpb", "inspect", copy, "--platform", "linux")
    assert "nobody checked that this name belongs to whoever made the bundle" in text
    # The official signer writes its signed attributes out of DER order: they are hashed as stored.
    der = data[data.rindex(SIG_HEADER) + len(SIG_HEADER) + 4 : -len(SIG_FOOTER)]
    attrs = [a.dump() for a in cms.ContentInfo.load(der)["content"]["signer_infos"][0]["signed_attrs"]]
    assert attrs != sorted(attrs)
    # And the official verifier, for contrast, calls this very file unsigned.
    assert "not signed" in _run(mcpb_cli, "verify", copy, check=False).stderr.lower()


def test_a_byte_changed_after_official_signing_is_tampered(
    mcpb_cli: Path, copy: Path, rsa_keys: Keys
) -> None:
    _run(mcpb_cli, "sign", copy, "--cert", rsa_keys.cert, "--key", rsa_keys.key)
    data = bytearray(copy.read_bytes())
    data[data.find(b"server/index.js")] ^= 0x20
    copy.write_bytes(bytes(data))
    code, report = inspect_json(copy)
    assert (code, report["verdict"], report["code"]) == (1, "refused", "signature_tampered")
    assert report["signature"]["status"] == "tampered"


def test_a_damaged_official_signature_is_invalid_not_unsigned(
    mcpb_cli: Path, copy: Path, rsa_keys: Keys
) -> None:
    _run(mcpb_cli, "sign", copy, "--cert", rsa_keys.cert, "--key", rsa_keys.key)
    data = copy.read_bytes()
    copy.write_bytes(data[:-40])  # cut into the DER and lose the footer
    code, report = inspect_json(copy)
    assert (code, report["code"], report["signature"]["status"]) == (1, "signature_invalid", "invalid")


def test_an_unsigned_again_archive_is_unsigned(
    mcpb_cli: Path, copy: Path, packed: Path, rsa_keys: Keys
) -> None:
    _run(mcpb_cli, "sign", copy, "--cert", rsa_keys.cert, "--key", rsa_keys.key)
    _run(mcpb_cli, "unsign", copy)
    assert copy.read_bytes() == packed.read_bytes()
    assert inspect_json(copy)[1]["signature"]["status"] == "unsigned"


def test_a_raised_comment_over_an_official_signature_still_verifies(
    mcpb_cli: Path, copy: Path, rsa_keys: Keys, packed: Path
) -> None:
    _run(mcpb_cli, "sign", copy, "--cert", rsa_keys.cert, "--key", rsa_keys.key)
    data = bytearray(copy.read_bytes())
    zip_len = len(packed.read_bytes())
    eocd = data.rfind(b"PK\x05\x06", 0, zip_len)
    struct.pack_into("<H", data, eocd + 20, len(data) - zip_len)  # what newer packers do
    copy.write_bytes(bytes(data))
    with zipfile.ZipFile(copy) as zf:  # a strict zip reader is content with it
        assert zf.testzip() is None
    code, report = inspect_json(copy)
    assert (code, report["signature"]["status"]) == (0, "signed")


@pytest.mark.parametrize("digest", ["sha256", "sha384", "sha512"])
def test_ecdsa_signatures_made_by_openssl_cms(copy: Path, ec_keys: Keys, digest: str) -> None:
    _append_block(copy, _openssl_sign(copy, ec_keys, "-md", digest))
    code, report = inspect_json(copy)
    assert code == 0
    assert report["signature"] == {
        "status": "signed",
        "subject": _subject(ec_keys.cert),
        "fingerprint_sha256": _fingerprint(ec_keys.cert),
    }


def test_openssl_signatures_without_attributes_and_with_rsa_pss(
    copy: Path, rsa_keys: Keys, ec_keys: Keys
) -> None:
    unsigned = copy.read_bytes()
    for keys, options in (
        (ec_keys, ("-noattr", "-md", "sha256")),
        (rsa_keys, ("-md", "sha384", "-keyopt", "rsa_padding_mode:pss")),
        (rsa_keys, ("-md", "sha512")),
        # A signer named by its key identifier: SignerInfo and SignedData are then version 3.
        (ec_keys, ("-keyid", "-md", "sha256")),
    ):
        copy.write_bytes(unsigned)
        _append_block(copy, _openssl_sign(copy, keys, *options))
        code, report = inspect_json(copy)
        assert (code, report["signature"]["status"]) == (0, "signed"), options


def test_a_sha1_signature_is_invalid(copy: Path, rsa_keys: Keys) -> None:
    _append_block(copy, _openssl_sign(copy, rsa_keys, "-md", "sha1"))
    code, report = inspect_json(copy)
    assert (code, report["code"], report["signature"]["status"]) == (1, "signature_invalid", "invalid")


def test_an_openssl_signature_over_other_bytes_is_tampered(copy: Path, ec_keys: Keys, work: Path) -> None:
    other = work / "other.bin"
    other.write_bytes(b"not the archive")
    _append_block(copy, _openssl_sign(other, ec_keys, "-md", "sha256"))
    code, report = inspect_json(copy)
    assert (code, report["signature"]["status"]) == (1, "tampered")


def test_extract_check_tree_and_convert_an_official_archive(copy: Path, tmp_path: Path) -> None:
    dest = tmp_path / "unpacked"
    code, out, err = bundlectl("mcpb", "extract", copy, dest, "--platform", "linux", "-o", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["lock"] == "sha256:" + hashlib.sha256(copy.read_bytes()).hexdigest()
    assert (dest / "server/lib/store.js").read_text() == "module.exports = {};\n"
    assert stat.S_IMODE((dest / "server/sync.sh").stat().st_mode) == 0o700
    assert stat.S_IMODE((dest / "server/index.js").stat().st_mode) == 0o600
    assert bundlectl("mcpb", "check-tree", dest, result["tree_digest"])[0] == 0
    (dest / "server/sync.sh").write_text("#!/bin/sh\ncurl evil\n")
    assert bundlectl("mcpb", "check-tree", dest, result["tree_digest"])[0] == 1

    code, doc, err = bundlectl("mcpb", "to-bundle", copy, "--platform", "linux", "--root", str(dest))
    assert (code, err) == (0, "")
    parsed = parse_bundle_text(doc)
    assert parsed.bundle is not None and not parsed.blocking, parsed.issues
    mcp = parsed.bundle.mcps[0]
    assert (mcp.type, mcp.command) == ("command", "node")  # type: ignore[union-attr]
    assert mcp.args[0] == f"{dest}/server/index.js"  # type: ignore[union-attr]
    assert mcp.env == {"NOTES_TOKEN": "${setup.token}", "NODE_PATH": f"{dest}/server/lib"}  # type: ignore[union-attr]


def test_a_refused_extract_leaves_the_folder_untouched(copy: Path, tmp_path: Path) -> None:
    data = bytearray(copy.read_bytes())
    data[data.find(b"server/index.js")] ^= 0x20  # the local header now disagrees with the directory
    copy.write_bytes(bytes(data))
    dest = tmp_path / "unpacked"
    code, _, err = bundlectl("mcpb", "extract", copy, dest)
    assert (code, err.strip()) == (
        1,
        "refused (zip_malformed): entry 'server/index.js' has a different name in its local header",
    )
    assert not dest.exists()
