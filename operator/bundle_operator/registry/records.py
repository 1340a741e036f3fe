"""A registry record read from its bytes, and whether its .mcpb package can be installed (seed 003).

A record is the API's ``ServerResponse``: ``{"server": {name, version, packages, ...}, "_meta":
{"io.modelcontextprotocol.registry/official": {status, isLatest, ...}}}``. Only the fields used here
are typed; the rest is kept as given, for people to read. A record is installable only when its
``mcpb`` package has an https URL without credentials and a digest is known (the record's
``fileSha256``, or the one the user pinned when the record has none); both given and different is
a conflict, and a deleted record is never installed. What is shown of a record is printable, cut
to a bounded length, and has the userinfo of its URLs masked.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from bundle_operator.document.issues import printable
from bundle_operator.document.issues import shown as quoted
from bundle_operator.fetch import shown
from bundle_operator.registry.names import SERVER_NAME_MAX, VERSION_MAX

OFFICIAL = "io.modelcontextprotocol.registry/official"
MCPB = "mcpb"
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_STATUS_MESSAGE_MAX = 300
_KINDS_SHOWN = 8
# A description is a line or two; the whole of it stays in ``server`` for whoever asks.
_DESCRIPTION_MAX = 1000
# A ServerResponse is a handful of levels deep; its strings are walked recursively to be shown.
MAX_DEPTH = 32
# A URL's userinfo: from "://" to the last "@" before the authority ends.
_USERINFO = re.compile(r"://([^/?#\s]*)@")

Status = Literal["active", "deprecated", "deleted"]


class RecordInvalid(ValueError):
    """The answer is not a record this reader can use; the message names the field."""


@dataclass(frozen=True)
class Package:
    """One entry of ``server.packages``."""

    registry_type: str
    identifier: str
    file_sha256: str | None
    version: str | None


@dataclass(frozen=True)
class Record:
    """One version of one server, as the registry published it."""

    name: str
    version: str
    description: str
    packages: tuple[Package, ...]
    status: Status
    status_message: str | None
    is_latest: bool | None
    server: dict[str, Any] = field(repr=False)  # the record's server object, as given

    @property
    def fingerprint(self) -> str:
        """A digest of what the record says (server object and status), to tell two reads apart."""
        canonical = json.dumps([self.server, self.status], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()

    def mcpb_packages(self) -> list[Package]:
        """The packages of type mcpb, in the record's order."""
        return [p for p in self.packages if p.registry_type == MCPB]

    def remotes(self) -> list[str]:
        """The remote servers the record offers, each as ``type url``, shown as messages show URLs."""
        remotes = self.server.get("remotes")
        out = []
        for remote in remotes if isinstance(remotes, list) else []:
            url = remote.get("url") if isinstance(remote, dict) else None
            if isinstance(url, str):
                kind = remote.get("type")
                shown_kind = kind if isinstance(kind, str) else "remote"
                out.append(f"{quoted(shown_kind, 32)} {quoted(masked(url), 256)}")
        return out


def parse_record(body: bytes) -> Record:
    """The record in an answer's bytes; ``RecordInvalid`` when it is not JSON or not a record."""
    return record_of(load_json(body), "")


def load_json(body: bytes) -> object:
    """An answer's JSON value; ``RecordInvalid`` when it is not UTF-8 JSON as RFC 8259 has it."""
    try:
        # RFC 8259: JSON between systems is UTF-8; json.loads would also guess UTF-16 or UTF-32.
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise RecordInvalid("the answer is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RecordInvalid(f"the answer is not JSON (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise RecordInvalid("the answer nests too deeply to be a record") from None
    except ValueError:  # an integer of more digits than Python converts, or NaN or Infinity
        raise RecordInvalid(
            "the answer is not JSON (a number too long to read, or NaN or Infinity)"
        ) from None


def _no_constant(name: str) -> object:
    raise ValueError(name)


def record_of(data: object, where: str) -> Record:
    """A ``ServerResponse`` object as a Record; ``where`` prefixes field names (``servers/3``)."""
    if not isinstance(data, dict):
        raise RecordInvalid(f"{where or 'the answer'} is not a JSON object")
    server = data.get("server")
    if not isinstance(server, dict):
        raise RecordInvalid(f"{where}/server is missing or not an object")
    if _deeper_than(data, MAX_DEPTH):
        raise RecordInvalid(
            f"{where or 'the answer'} nests too deeply to be a record (over {MAX_DEPTH} levels)"
        )
    name = _text(server, "name", f"{where}/server")
    version = _text(server, "version", f"{where}/server")
    description = server.get("description")
    packages = server.get("packages", [])
    if packages is None:
        packages = []
    if not isinstance(packages, list):
        raise RecordInvalid(f"{where}/server/packages is not a list")
    meta = data.get("_meta")
    official = meta.get(OFFICIAL) if isinstance(meta, dict) else None
    official = official if isinstance(official, dict) else {}
    status = official.get("status", "active")
    if status not in ("active", "deprecated", "deleted"):
        raise RecordInvalid(f"{where}/_meta/{OFFICIAL}/status is not active, deprecated or deleted")
    message = official.get("statusMessage")
    latest = official.get("isLatest")
    return Record(
        name=name,
        version=version,
        description=_shown_text(description, _DESCRIPTION_MAX) if isinstance(description, str) else "",
        packages=tuple(_package(p, f"{where}/server/packages/{i}") for i, p in enumerate(packages)),
        status=status,
        status_message=_shown_text(message, _STATUS_MESSAGE_MAX) if isinstance(message, str) else None,
        is_latest=latest if isinstance(latest, bool) else None,
        server=server,
    )


def _deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels deep (no recursion)."""
    level: list[object] = [value]
    for _ in range(limit + 1):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return False
    return True


def _shown_text(text: str, limit: int) -> str:
    """A free text of the record as people see it: passwords masked, cut at ``limit``, printable."""
    return printable(masked(text)[:limit])


def masked(text: str) -> str:
    """``text`` with the userinfo of every URL in it masked: ``user:***@`` or, a lone token, ``***@``."""
    if "://" not in text:
        return text
    return _USERINFO.sub(_masked_userinfo, text)


def _masked_userinfo(match: re.Match[str]) -> str:
    user, colon, _ = match.group(1).partition(":")
    # A userinfo without a password is usually a token standing alone (https://TOKEN@host).
    return f"://{user}:***@" if colon else "://***@"


def masked_tree(value: Any) -> Any:
    """A copy of a record's JSON value with every string ``masked`` (nesting is at most MAX_DEPTH)."""
    if isinstance(value, str):
        return masked(value)
    if isinstance(value, dict):
        return {masked(str(k)): masked_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [masked_tree(v) for v in value]
    return value


def _text(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise RecordInvalid(f"{where}/{key} is missing or not a string")
    return value


def _package(data: object, where: str) -> Package:
    if not isinstance(data, dict):
        raise RecordInvalid(f"{where} is not an object")
    digest = data.get("fileSha256")
    if digest is not None and (not isinstance(digest, str) or not _SHA256.fullmatch(digest.lower())):
        raise RecordInvalid(f"{where}/fileSha256 is not 64 hex digits")
    version = data.get("version")
    return Package(
        registry_type=_text(data, "registryType", where),
        identifier=_text(data, "identifier", where),
        file_sha256=digest.lower() if isinstance(digest, str) else None,
        version=version if isinstance(version, str) else None,
    )


# ------------------------------------------------------------------------------------ installable


@dataclass(frozen=True)
class Installable:
    """The archive to download and the digest it must have; ``warning`` for a deprecated record."""

    package_url: str
    sha256: str
    digest_from: Literal["record", "spec"]
    warning: str | None = None


@dataclass(frozen=True)
class NotInstallable:
    """Why nothing may be downloaded: ``reason`` is the Bundle's Stalled reason (DESIGN.md §9.3)."""

    reason: str
    message: str


def installable(record: Record, pinned_sha256: str | None = None) -> Installable | NotInstallable:
    """Whether the record's mcpb package may be downloaded, and with which digest (seed 003).

    Of several mcpb packages this is the first that may be; ``package_verdicts`` has them all.
    """
    verdicts = package_verdicts(record, pinned_sha256)
    if isinstance(verdicts, NotInstallable):
        return verdicts
    return next((v for v in verdicts if isinstance(v, Installable)), verdicts[0])


def package_verdicts(
    record: Record, pinned_sha256: str | None = None
) -> list[Installable | NotInstallable] | NotInstallable:
    """The verdict on each mcpb package of the record, in its order, or why none can be used.

    A record may carry one build per platform: which one runs here only its archive's manifest
    says, so the caller reads them in turn (``sources.registry_source``).
    """
    label = record_label(record)
    if record.status == "deleted":
        why = f": {record.status_message}" if record.status_message else ""
        return NotInstallable("RegistryRecordDeleted", f"{label} is deleted in the registry{why}")
    packages = record.mcpb_packages()
    if not packages:
        return NotInstallable("RegistryNoMcpbPackage", _no_mcpb(record, label))
    pinned = pinned_sha256.lower() if pinned_sha256 else None
    if pinned is not None and any(p.file_sha256 == pinned for p in packages):
        # The pin names one build: the one a Bundle resolved, which its installations must use.
        packages = [p for p in packages if p.file_sha256 == pinned]
    return [_package_verdict(record, label, package, pinned) for package in packages]


def _package_verdict(
    record: Record, label: str, package: Package, pinned_sha256: str | None
) -> Installable | NotInstallable:
    refused = package_url_problem(package.identifier)
    if refused is not None:
        return NotInstallable("InsecurePackageUrl", refused)
    pinned = pinned_sha256.lower() if pinned_sha256 else None
    if package.file_sha256 is not None and pinned is not None and package.file_sha256 != pinned:
        return NotInstallable(
            "RegistryChecksumConflict",
            f"the record gives fileSha256 {package.file_sha256}, the spec pins {pinned}; nothing is "
            "downloaded while they differ",
        )
    digest = package.file_sha256 or pinned
    if digest is None:
        return NotInstallable(
            "RegistryChecksumMissing",
            f"the mcpb package of {label} has no fileSha256; download the "
            "archive from its publisher and pin its SHA-256 in fileSha256, or use an mcpb source",
        )
    warning = None
    if record.status == "deprecated":
        why = f": {record.status_message}" if record.status_message else ""
        warning = f"{label} is deprecated in the registry{why}"
    return Installable(
        package_url=package.identifier,
        sha256=digest,
        digest_from="record" if package.file_sha256 is not None else "spec",
        warning=warning,
    )


def record_label(record: Record) -> str:
    """The record's name and version as a message quotes them: printable, and of bounded length."""
    return f"{quoted(record.name, SERVER_NAME_MAX)} {quoted(record.version, VERSION_MAX)}"


def _no_mcpb(record: Record, label: str) -> str:
    """Why a record without an mcpb package is not installed: what it offers instead."""
    remotes = record.remotes()
    if remotes:
        more = f" and {len(remotes) - 1} more" if len(remotes) > 1 else ""
        offered = f"it is offered as a remote server ({remotes[0]}{more}), which runs at its publisher"
        if not record.packages:
            return (
                f"{label} has no mcpb package: {offered} and has nothing to install; "
                "use its URL as a url MCP in a bundle instead"
            )
        return f"{label} has no mcpb package{_kinds(record)}; {offered}"
    return f"{label} has no mcpb package{_kinds(record)}"


def _kinds(record: Record) -> str:
    """The kinds of package a record has, for a message: a few, each cut short."""
    kinds = sorted({quoted(p.registry_type, 32) for p in record.packages})
    if not kinds:
        return " (it has no packages)"
    more = f" and {len(kinds) - _KINDS_SHOWN} more" if len(kinds) > _KINDS_SHOWN else ""
    return f" (it has {', '.join(kinds[:_KINDS_SHOWN])}{more} packages)"


def package_url_problem(identifier: str) -> str | None:
    """Why an mcpb package URL may not be fetched (not https, credentials in it), or None."""
    try:
        url = httpx.URL(identifier)
        host = url.host  # decoded from IDNA on first use
    # Besides InvalidURL, httpx lets a lone surrogate's UnicodeEncodeError and a bad IDNA label's
    # IDNAError (a UnicodeError) through.
    except (httpx.InvalidURL, UnicodeError):
        return "the mcpb package URL cannot be read as a URL"
    if url.scheme != "https" or not host:
        return f"the mcpb package URL is not an https URL ({quoted(url.scheme or 'no scheme', 32)})"
    if url.userinfo:
        where = quoted(shown(url), 256)
        return f"the mcpb package URL {where} carries credentials; only plain https URLs are fetched"
    return None
