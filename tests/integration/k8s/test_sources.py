"""Bundle sources: inline, ConfigMap, https URL and .mcpb archives, resolved into status fields.

URLs are fetched from a real HTTPS server on 127.0.0.1 with its own throwaway CA; archives are
packed and signed by the official mcpb CLI (pinned in tests/tools/mcpb) and `openssl cms`, with
the helpers of tests/integration/mcpb.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import shutil
import socket
import ssl
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from bundle_operator.document.issues import Code as IssueCode
from bundle_operator.document.issues import Issue, blocking, warning
from bundle_operator.document.models import CommandMcp
from bundle_operator.document.parse import parse_bundle_text
from bundle_operator.k8s.bundle.sources import Resolved, SourceError, SourceSettings, resolve
from bundle_operator.k8s.bundle.status import bundle_status_fields, status_issues
from bundle_operator.k8s.resources import BundleStatus
from bundle_operator.sources.models import BundleSource
from tests.fixtures.mcpb_servers.build import mcpb_executable
from tests.integration.mcpb.test_mcpb_official_cli import MANIFEST as NOTES_MANIFEST
from tests.integration.mcpb.test_mcpb_official_cli import (
    Keys,
    _append_block,
    _fingerprint,
    _openssl_sign,
    _run,
    _subject,
)
from tests.tls import QuietHandler, https_server, throwaway_tls

REPO = Path(__file__).resolve().parents[3]
TRIAGE_TEXT = (REPO / "examples" / "github-triage.yaml").read_text()
NS = "agents"
SECRET_MARKER = b"do-not-print-this-secret-value"

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


# ------------------------------------------------------------------------------- the fake reader


class FakeReader:
    """The ConfigMaps and Secrets of a test, as the API returns them (binaryData and data base64).

    An in-memory stand-in for the kube-apiserver, so these tests exercise sources.py alone; the
    e2e tests read real ConfigMaps and Secrets from a real kube-apiserver.
    """

    def __init__(self) -> None:
        self.config_maps: dict[tuple[str, str], dict[str, Any]] = {}
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}

    def config_map(
        self, name: str, data: dict[str, str] | None = None, binary: dict[str, bytes] | None = None
    ) -> None:
        obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        if data is not None:
            obj["data"] = data
        if binary is not None:
            obj["binaryData"] = {k: base64.b64encode(v).decode() for k, v in binary.items()}
        self.config_maps[(NS, name)] = obj

    def secret(self, name: str, data: dict[str, bytes]) -> None:
        encoded = {k: base64.b64encode(v).decode() for k, v in data.items()}
        self.secrets[(NS, name)] = {"apiVersion": "v1", "kind": "Secret", "data": encoded}

    async def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.config_maps.get((namespace, name)))

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.secrets.get((namespace, name)))


# ------------------------------------------------------------------------------ the HTTPS server


@dataclass
class Server:
    port: int
    ca: ssl.SSLContext
    files: dict[str, bytes] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def serve(self, path: str, body: bytes) -> tuple[str, str]:
        """Serve ``body`` at ``path``; its URL and SHA-256."""
        self.files[path] = body
        return self.url(path), hashlib.sha256(body).hexdigest()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tls = throwaway_tls(tmp_path_factory.mktemp("tls"))
    state: dict[str, Server] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            srv = state["server"]
            path = urlsplit(self.path).path
            srv.hits[path] += 1
            if path.startswith("/status/"):
                self.answer(int(path.removeprefix("/status/")), b"status")
            elif path == "/huge":  # declares more than any cap, sends nothing
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 40))
                self.end_headers()
            elif path in srv.files:
                self.answer(200, srv.files[path])
            else:
                self.answer(404, b"not here")

    with https_server(Handler, tls) as port:
        state["server"] = Server(port=port, ca=tls.client_context())
        yield state["server"]


@pytest.fixture
def settings(server: Server, tmp_path: Path) -> SourceSettings:
    return SourceSettings(allow_private_sources=True, verify=server.ca, cache_dir=tmp_path)


@pytest.fixture
def reader() -> FakeReader:
    return FakeReader()


def _left_in(folder: Path) -> list[str]:
    """What a test's download folder still holds: nothing, once a source is read or refused."""
    return sorted(p.name for p in folder.iterdir())


async def _resolve(source: dict[str, Any], reader: FakeReader, settings: SourceSettings) -> Resolved:
    """Resolve a spec.source given as a manifest spells it (camelCase)."""
    return await resolve(BundleSource.model_validate(source), NS, reader, settings)


async def _refusal(source: dict[str, Any], reader: FakeReader, settings: SourceSettings) -> SourceError:
    with pytest.raises(SourceError) as caught:
        await _resolve(source, reader, settings)
    return caught.value


# ------------------------------------------------------------------------------ inline and ConfigMap


async def test_an_inline_document_has_the_digest_of_the_same_yaml(
    reader: FakeReader, settings: SourceSettings
) -> None:
    # What the API server hands over: the manifest's YAML loaded, sent as JSON.
    inline = json.loads(json.dumps(yaml.safe_load(TRIAGE_TEXT)))
    resolved = await _resolve({"inline": inline}, reader, settings)
    expected = parse_bundle_text(TRIAGE_TEXT).digest
    assert expected is not None and expected.startswith("sha256:")
    assert resolved.parsed.digest == expected
    assert (resolved.origin, resolved.signature) == ("inline", None)


async def test_config_map_text_and_binary_data_read_the_same_document(
    reader: FakeReader, settings: SourceSettings
) -> None:
    reader.config_map("triage", data={"bundle.yaml": TRIAGE_TEXT})
    reader.config_map("triage-bin", binary={"bundle.yaml": TRIAGE_TEXT.encode()})
    text = await _resolve({"configMapRef": {"name": "triage", "key": "bundle.yaml"}}, reader, settings)
    binary = await _resolve({"configMapRef": {"name": "triage-bin", "key": "bundle.yaml"}}, reader, settings)
    assert text.parsed.digest == binary.parsed.digest == parse_bundle_text(TRIAGE_TEXT).digest
    assert text.origin == "ConfigMap triage/bundle.yaml"
    assert binary.origin == "ConfigMap triage-bin/bundle.yaml"
    # Line numbers come from the text, as they do for bundlectl.
    assert text.parsed.source_map.line_of("/mcps/0") == 24


async def test_a_missing_config_map_is_named(reader: FakeReader, settings: SourceSettings) -> None:
    error = await _refusal({"configMapRef": {"name": "triage", "key": "bundle.yaml"}}, reader, settings)
    assert (error.reason, error.permanent) == ("ConfigMapNotFound", True)
    assert error.message.startswith("spec.source.configMapRef: ConfigMap 'triage' does not exist")
    assert f"namespace '{NS}'" in error.message


async def test_a_missing_config_map_key_is_named(reader: FakeReader, settings: SourceSettings) -> None:
    reader.config_map("triage", data={"other.yaml": TRIAGE_TEXT})
    error = await _refusal({"configMapRef": {"name": "triage", "key": "bundle.yaml"}}, reader, settings)
    assert (error.reason, error.permanent) == ("ConfigMapKeyNotFound", True)
    assert error.message.startswith("spec.source.configMapRef: ConfigMap 'triage' has no key 'bundle.yaml'")
    assert "schema_version" not in error.message  # never the document's text


@pytest.mark.parametrize(
    "source",
    [{}, {"inline": {"schema_version": "0.1.0"}, "configMapRef": {"name": "a", "key": "b"}}],
)
async def test_exactly_one_source_is_required(
    reader: FakeReader, settings: SourceSettings, source: dict[str, Any]
) -> None:
    error = await _refusal(source, reader, settings)
    assert (error.reason, error.permanent) == ("InvalidSource", True)
    assert error.message.startswith("spec.source: set exactly one of inline, configMapRef, url, mcpb")


# ------------------------------------------------------------------------------------------ url


async def test_a_url_document_is_fetched_checked_and_cached(
    server: Server, reader: FakeReader, settings: SourceSettings, tmp_path: Path
) -> None:
    url, sha = server.serve("/docs/triage.yaml", TRIAGE_TEXT.encode())
    source = {"url": {"url": url + "?token=hunter2", "sha256": sha}}
    first = await _resolve(source, reader, settings)
    assert first.parsed.digest == parse_bundle_text(TRIAGE_TEXT).digest
    assert first.origin == url  # no query string: it may carry a token
    assert _left_in(tmp_path) == []  # the download is gone once read
    second = await _resolve(source, reader, settings)
    assert second.parsed.digest == first.parsed.digest
    assert server.hits["/docs/triage.yaml"] == 1  # the second resolve did not download again


async def test_a_wrong_checksum_is_permanent(
    server: Server, reader: FakeReader, settings: SourceSettings, tmp_path: Path
) -> None:
    url, _ = server.serve("/docs/changed.yaml", TRIAGE_TEXT.encode())
    error = await _refusal({"url": {"url": url + "?token=hunter2", "sha256": "0" * 64}}, reader, settings)
    assert (error.reason, error.permanent) == ("ChecksumMismatch", True)
    assert error.message.startswith("spec.source.url: ")
    assert url in error.message and "hunter2" not in error.message
    assert _left_in(tmp_path) == []


async def test_loopback_is_refused_unless_private_sources_are_allowed(
    server: Server, reader: FakeReader, settings: SourceSettings
) -> None:
    url, sha = server.serve("/docs/private.yaml", TRIAGE_TEXT.encode())
    strict = SourceSettings(verify=server.ca, cache_dir=settings.cache_dir)
    error = await _refusal({"url": {"url": url, "sha256": sha}}, reader, strict)
    assert (error.reason, error.permanent) == ("FetchFailed", True)
    assert "non-public address" in error.message
    assert server.hits["/docs/private.yaml"] == 0


async def test_a_server_that_is_down_is_transient(reader: FakeReader, settings: SourceSettings) -> None:
    with socket.socket() as probe:  # a port nobody listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = await _refusal(
        {"url": {"url": f"https://127.0.0.1:{port}/bundle.yaml", "sha256": "a" * 64}}, reader, settings
    )
    assert (error.reason, error.permanent) == ("FetchFailed", False)


@pytest.mark.parametrize(("status", "permanent"), [(503, False), (429, False), (404, True), (403, True)])
async def test_http_statuses(
    server: Server, reader: FakeReader, settings: SourceSettings, status: int, permanent: bool
) -> None:
    error = await _refusal(
        {"url": {"url": server.url(f"/status/{status}"), "sha256": "a" * 64}}, reader, settings
    )
    assert (error.reason, error.permanent) == ("FetchFailed", permanent)
    assert f"answered {status}" in error.message


async def test_a_document_over_the_cap_is_refused(
    server: Server, reader: FakeReader, settings: SourceSettings
) -> None:
    error = await _refusal({"url": {"url": server.url("/huge"), "sha256": "a" * 64}}, reader, settings)
    assert (error.reason, error.permanent) == ("FetchFailed", True)
    assert f"at most {5 * 1024 * 1024}" in error.message


# ------------------------------------------------------------------------------------------ mcpb


@dataclass
class Archives:
    unsigned: bytes
    signed: bytes  # by the official CLI, with rsa
    signed_ec: bytes  # by openssl cms
    tampered: bytes
    rsa: Keys
    ec: Keys


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Archives:
    """The notes archive of tests/integration/mcpb, packed and signed by the official tools."""
    mcpb = mcpb_executable()
    work = tmp_path_factory.mktemp("mcpb")
    src = work / "notes-src"
    (src / "server").mkdir(parents=True)
    (src / "manifest.json").write_text(json.dumps(NOTES_MANIFEST, indent=2))
    (src / "server" / "index.js").write_text("console.log('notes');\n")
    unsigned = work / "notes.mcpb"
    _run(mcpb, "pack", src, unsigned)

    rsa = Keys(work / "rsa-cert.pem", work / "rsa-key.pem")
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-keyout", rsa.key,
         "-out", rsa.cert, "-subj", "/CN=Notes Publisher/O=Example Org/C=NL")  # fmt: skip
    ec_keys = Keys(work / "ec-cert.pem", work / "ec-key.pem")
    _run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", ec_keys.key)
    _run("openssl", "req", "-x509", "-new", "-key", ec_keys.key, "-days", "30", "-out", ec_keys.cert,
         "-subj", "/CN=Other Publisher/O=Example Org")  # fmt: skip

    signed = work / "signed.mcpb"
    shutil.copyfile(unsigned, signed)
    _run(mcpb, "sign", signed, "--cert", rsa.cert, "--key", rsa.key)
    signed_ec = work / "signed-ec.mcpb"
    shutil.copyfile(unsigned, signed_ec)
    _append_block(signed_ec, _openssl_sign(signed_ec, ec_keys, "-md", "sha256"))
    tampered = bytearray(signed.read_bytes())
    tampered[tampered.find(b"server/index.js")] ^= 0x20
    return Archives(
        unsigned=unsigned.read_bytes(),
        signed=signed.read_bytes(),
        signed_ec=signed_ec.read_bytes(),
        tampered=bytes(tampered),
        rsa=rsa,
        ec=ec_keys,
    )


def _colon_upper(fingerprint: str) -> str:
    """A fingerprint the way `openssl x509 -fingerprint` prints it."""
    return ":".join(fingerprint[i : i + 2] for i in range(0, len(fingerprint), 2)).upper()


async def test_an_unsigned_archive_from_config_map_binary_data(
    archives: Archives, reader: FakeReader, settings: SourceSettings
) -> None:
    reader.config_map("notes", binary={"notes.mcpb": archives.unsigned})
    resolved = await _resolve(
        {"mcpb": {"configMapRef": {"name": "notes", "key": "notes.mcpb"}}}, reader, settings
    )
    assert resolved.origin == "mcpb ConfigMap notes/notes.mcpb"
    assert resolved.signature is not None and resolved.signature.status == "Unsigned"
    bundle = resolved.parsed.bundle
    assert bundle is not None and not resolved.parsed.blocking, resolved.parsed.issues
    assert (bundle.name, bundle.version) == ("notes", "0.4.1")
    # The MCP runs from the archive itself, which the installation may upload: this one, by content.
    digest = "sha256:" + hashlib.sha256(archives.unsigned).hexdigest()
    mcp = bundle.mcps[0]
    assert isinstance(mcp, CommandMcp) and mcp.artifact is not None
    assert (mcp.artifact.digest, mcp.args[0]) == (digest, "${__dirname}/server/index.js")
    assert resolved.archives == (digest,)
    # ${DOCUMENTS} is the instance's folder, resolved where the server launches, not the operator's.
    assert [(f.key, f.default) for f in bundle.setup] == [
        ("token", None),
        ("notes_dir", "${DOCUMENTS}/notes"),
    ]
    status = bundle_status_fields(resolved)
    assert status["signature"] == {"status": "Unsigned", "subject": None, "fingerprintSha256": None}
    assert [(f["key"], f["type"]) for f in status["setupFields"]] == [
        ("token", "secret"),
        ("notes_dir", "string"),
    ]


async def test_a_signed_archive_from_a_secret_reports_its_signer(
    archives: Archives, reader: FakeReader, settings: SourceSettings
) -> None:
    reader.secret("notes", {"archive": archives.signed})
    resolved = await _resolve(
        {"mcpb": {"secretRef": {"name": "notes", "key": "archive"}, "requireSignature": True}},
        reader,
        settings,
    )
    assert resolved.origin == "mcpb Secret notes/archive"
    assert bundle_status_fields(resolved)["signature"] == {
        "status": "Signed",
        "subject": _subject(archives.rsa.cert),
        "fingerprintSha256": _fingerprint(archives.rsa.cert),
    }


async def test_an_archive_by_url_is_downloaded_once(
    archives: Archives, server: Server, reader: FakeReader, settings: SourceSettings, tmp_path: Path
) -> None:
    url, sha = server.serve("/archives/notes.mcpb", archives.signed_ec)
    source = {"mcpb": {"url": url, "sha256": sha}}
    first = await _resolve(source, reader, settings)
    second = await _resolve(source, reader, settings)
    assert first.origin == f"mcpb {url}"
    assert first.signature is not None and first.signature.subject == _subject(archives.ec.cert)
    assert second.parsed.digest == first.parsed.digest is not None
    assert server.hits["/archives/notes.mcpb"] == 1
    assert _left_in(tmp_path) == []


async def test_an_archive_with_a_wrong_checksum_is_refused(
    archives: Archives, server: Server, reader: FakeReader, settings: SourceSettings
) -> None:
    url, _ = server.serve("/archives/other.mcpb", archives.unsigned)
    error = await _refusal({"mcpb": {"url": url, "sha256": "b" * 64}}, reader, settings)
    assert (error.reason, error.permanent) == ("ChecksumMismatch", True)
    assert error.message.startswith("spec.source.mcpb.url: ")


async def test_a_tampered_archive_has_an_invalid_signature(
    archives: Archives, reader: FakeReader, settings: SourceSettings
) -> None:
    reader.config_map("notes", binary={"notes.mcpb": archives.tampered})
    error = await _refusal(
        {"mcpb": {"configMapRef": {"name": "notes", "key": "notes.mcpb"}}}, reader, settings
    )
    assert (error.reason, error.permanent) == ("SignatureInvalid", True)
    assert error.message.startswith(
        "spec.source.mcpb: the archive's signature does not verify (signature_tampered): "
    )


async def test_a_tampered_archive_in_a_secret_keeps_its_details_out_of_the_message(
    archives: Archives, reader: FakeReader, settings: SourceSettings
) -> None:
    reader.secret("notes", {"archive": archives.tampered})
    error = await _refusal({"mcpb": {"secretRef": {"name": "notes", "key": "archive"}}}, reader, settings)
    assert (error.reason, error.permanent) == ("SignatureInvalid", True)
    assert error.message == (
        "spec.source.mcpb: the archive's signature does not verify (signature_tampered); run `bundlectl "
        "mcpb inspect` on the archive for the details (not shown: it is kept in a Secret); use an intact "
        "archive from its publisher"
    )


@pytest.mark.parametrize(
    ("policy", "field_name"),
    [
        ({"requireSignature": True}, "requireSignature"),
        ({"trustedFingerprints": ["ab" * 32]}, "trustedFingerprints"),
    ],
)
async def test_an_unsigned_archive_is_refused_when_a_signature_is_required(
    archives: Archives, reader: FakeReader, settings: SourceSettings, policy: dict[str, Any], field_name: str
) -> None:
    reader.config_map("notes", binary={"notes.mcpb": archives.unsigned})
    source = {"mcpb": {"configMapRef": {"name": "notes", "key": "notes.mcpb"}, **policy}}
    error = await _refusal(source, reader, settings)
    assert (error.reason, error.permanent) == ("SignatureRequired", True)
    assert error.message.startswith(f"spec.source.mcpb.{field_name}: the archive is not signed")


async def test_trusted_fingerprints_accept_a_listed_signer_however_it_is_written(
    archives: Archives, reader: FakeReader, settings: SourceSettings
) -> None:
    reader.secret("notes", {"archive": archives.signed})
    listed = [_fingerprint(archives.ec.cert), _colon_upper(_fingerprint(archives.rsa.cert))]
    source = {"mcpb": {"secretRef": {"name": "notes", "key": "archive"}, "trustedFingerprints": listed}}
    resolved = await _resolve(source, reader, settings)
    assert resolved.signature is not None
    assert resolved.signature.fingerprint_sha256 == _fingerprint(archives.rsa.cert)


async def test_trusted_fingerprints_refuse_another_signer(
    archives: Archives, reader: FakeReader, settings: SourceSettings
) -> None:
    reader.secret("notes", {"archive": archives.signed})
    source = {
        "mcpb": {
            "secretRef": {"name": "notes", "key": "archive"},
            "trustedFingerprints": [_fingerprint(archives.ec.cert)],
        }
    }
    error = await _refusal(source, reader, settings)
    assert (error.reason, error.permanent) == ("SignerNotTrusted", True)
    assert error.message.startswith("spec.source.mcpb.trustedFingerprints: the archive is signed by")
    assert _fingerprint(archives.rsa.cert) in error.message


async def test_a_refused_archive_names_the_reason(reader: FakeReader, settings: SourceSettings) -> None:
    reader.config_map("notes", binary={"notes.mcpb": b"PK\x03\x04 not really a zip"})
    error = await _refusal(
        {"mcpb": {"configMapRef": {"name": "notes", "key": "notes.mcpb"}}}, reader, settings
    )
    assert (error.reason, error.permanent) == ("ArchiveRefused", True)
    assert error.message == (
        "spec.source.mcpb: the archive is refused (zip_malformed): "
        "not a zip archive (no end of central directory record)"
    )


async def test_a_refused_archive_in_a_secret_never_shows_its_bytes(
    reader: FakeReader, settings: SourceSettings
) -> None:
    reader.secret("notes", {"archive": b"PK\x03\x04" + SECRET_MARKER * 20})
    error = await _refusal({"mcpb": {"secretRef": {"name": "notes", "key": "archive"}}}, reader, settings)
    assert (error.reason, error.permanent) == ("ArchiveRefused", True)
    assert error.message.startswith("spec.source.mcpb: the archive is refused (")
    assert "not shown: it is kept in a Secret" in error.message
    assert SECRET_MARKER.decode() not in error.message


async def test_a_missing_secret_or_key_is_named(reader: FakeReader, settings: SourceSettings) -> None:
    source = {"mcpb": {"secretRef": {"name": "notes", "key": "archive"}}}
    missing = await _refusal(source, reader, settings)
    assert (missing.reason, missing.permanent) == ("SecretNotFound", True)
    assert missing.message.startswith("spec.source.mcpb.secretRef: Secret 'notes' does not exist")
    reader.secret("notes", {"other": SECRET_MARKER})
    no_key = await _refusal(source, reader, settings)
    assert (no_key.reason, no_key.permanent) == ("SecretKeyNotFound", True)
    assert no_key.message == (
        "spec.source.mcpb.secretRef: Secret 'notes' has no key 'archive'; add it or correct the key"
    )


async def test_a_pinned_checksum_holds_for_config_map_archives(
    archives: Archives, reader: FakeReader, settings: SourceSettings
) -> None:
    reader.config_map("notes", binary={"notes.mcpb": archives.unsigned})
    source = {"mcpb": {"configMapRef": {"name": "notes", "key": "notes.mcpb"}, "sha256": "c" * 64}}
    error = await _refusal(source, reader, settings)
    assert (error.reason, error.permanent) == ("ChecksumMismatch", True)


@pytest.mark.parametrize(
    ("mcpb", "message"),
    [
        ({}, "spec.source.mcpb: set exactly one of url, configMapRef, secretRef (found: none)"),
        (
            {"configMapRef": {"name": "a", "key": "b"}, "secretRef": {"name": "a", "key": "b"}},
            "spec.source.mcpb: set exactly one of url, configMapRef, secretRef "
            "(found: configMapRef, secretRef)",
        ),
        (
            {"url": "https://example.org/a.mcpb"},
            "spec.source.mcpb.sha256: required with url; set it to the archive's SHA-256",
        ),
    ],
)
async def test_an_mcpb_source_names_exactly_one_origin(
    reader: FakeReader, settings: SourceSettings, mcpb: dict[str, Any], message: str
) -> None:
    error = await _refusal({"mcpb": mcpb}, reader, settings)
    assert (error.reason, error.permanent, error.message) == ("InvalidSource", True, message)


# ---------------------------------------------------------------------------------------- status


async def test_status_fields_of_the_triage_example(reader: FakeReader, settings: SourceSettings) -> None:
    reader.config_map("triage", data={"bundle.yaml": TRIAGE_TEXT})
    resolved = await _resolve({"configMapRef": {"name": "triage", "key": "bundle.yaml"}}, reader, settings)
    status = bundle_status_fields(resolved)
    assert status == {
        "digest": parse_bundle_text(TRIAGE_TEXT).digest,
        "bundleName": "github-triage",
        "version": "1.4.0",
        "entities": {"mcps": 1, "skills": 2, "agents": 1, "channels": 1, "automations": 1, "policies": 2},
        "setupFields": [
            {
                "key": "github_token",
                "label": "GitHub token",
                "type": "secret",
                "required": True,
                "description": "A fine-grained token with read access to issues and write access to labels.",
            },
            {
                "key": "org",
                "label": "GitHub organization",
                "type": "string",
                "required": True,
                "description": "The organization whose repositories are triaged.",
            },
            {
                "key": "telegram_bot_token",
                "label": "Telegram bot token",
                "type": "secret",
                "required": True,
                "description": None,
            },
        ],
        "source": None,
        "signature": None,
        "issues": [],
    }
    BundleStatus.model_validate(status)  # exactly the fields the CRD declares


LOCAL_TOOLS = """\
schema_version: "0.1.0"
name: local-tools
setup:
  - key: token
    label: Token
    type: secret
mcps:
  - key: local
    name: Local
    type: command
    command: ./bin/server
agents:
  - key: helper
    name: Helper
    mcps: [local, missing]
"""


async def test_status_issues_carry_severity_code_path_entity_and_line(
    reader: FakeReader, settings: SourceSettings
) -> None:
    reader.config_map("local", data={"bundle.yaml": LOCAL_TOOLS})
    resolved = await _resolve({"configMapRef": {"name": "local", "key": "bundle.yaml"}}, reader, settings)
    status = bundle_status_fields(resolved)
    assert status["digest"] is not None and status["entities"]["mcps"] == 1
    assert [(i["severity"], i["code"], i["path"], i["entity"], i["line"]) for i in status["issues"]] == [
        ("Blocking", "unknown_reference", "/agents/0/mcps/1", "agent:helper", 15),
        ("Warning", "unused_setup_field", "/setup/0/key", "setup:token", 4),
        ("Warning", "unsupported_runtime", "/mcps/0/command", "mcp:local", 11),
    ]
    assert "'missing'" in status["issues"][0]["message"]


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ('schema_version: "0.1.0"\nname: [broken\n', "invalid_document", 3),
        ('schema_version: "9.9.9"\nname: future\n', "unsupported_schema_version", 1),
    ],
)
async def test_status_of_a_document_that_cannot_be_read(
    reader: FakeReader, settings: SourceSettings, text: str, code: str, line: int
) -> None:
    reader.config_map("broken", data={"bundle.yaml": text})
    resolved = await _resolve({"configMapRef": {"name": "broken", "key": "bundle.yaml"}}, reader, settings)
    status = bundle_status_fields(resolved)
    assert (status["digest"], status["bundleName"], status["version"], status["entities"]) == (
        None,
        None,
        None,
        None,
    )
    assert status["setupFields"] == []
    assert [(i["severity"], i["code"], i["line"]) for i in status["issues"]] == [("Blocking", code, line)]


def test_status_issues_keep_blocking_ones_when_there_are_too_many() -> None:
    noise = [warning(IssueCode.UNUSED_SETUP_FIELD, f"field {n} is unused", f"/setup/{n}") for n in range(150)]
    late: Issue = blocking(IssueCode.UNKNOWN_REFERENCE, "names nothing", "/agents/0/mcps/0")
    listed = status_issues([*noise, late])
    assert len(listed) == 100
    assert listed[-1]["severity"] == "Blocking" and listed[0]["path"] == "/setup/0"
    assert status_issues([late]) == [
        {
            "severity": "Blocking",
            "code": "unknown_reference",
            "path": "/agents/0/mcps/0",
            "entity": None,
            "line": None,
            "message": "names nothing",
        }
    ]
