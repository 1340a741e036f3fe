"""Artifacts on the reference platform: their rows in the store and their extracted folders on disk.

Each stored archive is extracted once, on upload, into a new private folder under the artifacts
directory; its row keeps the folder and the tree digest measured then, which a launch checks
again. The archive itself is not kept: the extracted tree is what runs.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from bundle_operator.mcpb.extract import extract_file
from bundle_operator.mcpb.reader import running_platform
from bundle_operator.platform import kinds
from bundle_operator.platform.conventions import WORKSPACE_PATTERN
from bundle_operator.platform.models import ARTIFACT_MEDIA_TYPE
from bundle_operator.platform.models.artifacts import DIGEST_PATTERN
from bundle_operator.reference_platform.storage import Row, Tx

log = logging.getLogger("bundle_operator.reference_platform")

# The store's kind for artifact rows; the digest is the row's name, unique per workspace.
ARTIFACTS = "artifacts"
ID_PREFIX = "art"
DIGEST = re.compile(DIGEST_PATTERN)
# Uploads in progress are written here, on the same disk as the folders they become.
UPLOADS = ".uploads"
# An extracted folder's name: the digest's hex and a random suffix (see extract_upload).
FOLDER_NAME = re.compile(r"[0-9a-f]{64}-[0-9a-f]{12}")


@dataclass(frozen=True)
class ExtractedArtifact:
    """An archive's extracted tree, as the launcher needs it."""

    digest: str
    folder: Path  # the extracted tree (the value of ${__dirname})
    tree_digest: str  # as recorded at extraction


def artifact_row(tx: Tx, workspace: str, digest: str) -> Row | None:
    """The stored artifact with ``digest`` in a workspace, or None."""
    return tx.find_name(ARTIFACTS, digest, workspace)


def extracted_artifact(tx: Tx, workspace: str, digest: str) -> ExtractedArtifact | None:
    """Where the artifact with ``digest`` was extracted and its tree digest, or None when not stored."""
    row = artifact_row(tx, workspace, digest)
    if row is None:
        return None
    folder = Path(row.data["_folder"])
    return ExtractedArtifact(digest=digest, folder=folder, tree_digest=row.data["tree_digest"])


def references(tx: Tx, workspace: str) -> dict[str, list[str]]:
    """The ids of the MCP server specs referring to each artifact digest, in creation order."""
    users: dict[str, list[str]] = {}
    for server in tx.select(workspace, kinds.MCP_SERVERS.path):
        artifact = server.data.get("artifact")
        if isinstance(artifact, dict):
            users.setdefault(str(artifact.get("digest")), []).append(server.id)
    return users


def referenced_by(tx: Tx, workspace: str, digest: str) -> list[str]:
    """The ids of the MCP server specs whose ``artifact.digest`` is ``digest``."""
    servers = tx.select(workspace, kinds.MCP_SERVERS.path, equals={"artifact.digest": digest})
    return [row.id for row in servers]


def artifact_view(row: Row, users: list[str]) -> dict[str, Any]:
    """An artifact as the API shows it."""
    return {
        "digest": row.name,
        "size": row.data["size"],
        "media_type": row.data["media_type"],
        "tree_digest": row.data["tree_digest"],
        "referenced_by": users,
        "created_at": row.created_at,
    }


def artifact_data(size: int, tree_digest: str, folder: Path) -> dict[str, Any]:
    """The stored data of a new artifact; the folder is kept hidden from API answers."""
    return {
        "size": size,
        "media_type": ARTIFACT_MEDIA_TYPE,
        "tree_digest": tree_digest,
        "_folder": str(folder),
    }


class Upload:
    """An archive being received: written to a private file and hashed on the way."""

    def __init__(self, root: Path) -> None:
        folder = root / UPLOADS
        folder.mkdir(mode=0o700, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=folder, prefix="upload-")
        self.path = Path(name)
        self._file: BinaryIO = os.fdopen(handle, "wb")
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        """Append ``chunk``."""
        self._hash.update(chunk)
        self._file.write(chunk)
        self.size += len(chunk)

    def finish(self) -> str:
        """Close the file; the digest of everything written, as ``sha256:<hex>``."""
        self._file.close()
        return "sha256:" + self._hash.hexdigest()

    def discard(self) -> None:
        """Remove the file."""
        self._file.close()
        self.path.unlink(missing_ok=True)


def extract_upload(root: Path, workspace: str, digest: str, archive: Path) -> tuple[Path, str]:
    """Extract ``archive`` into a new private folder for the workspace; (folder, tree digest).

    Raises the reader's ``Refused`` when the archive is refused, leaving no folder behind.
    """
    parent = root / workspace
    parent.mkdir(mode=0o700, exist_ok=True)
    # A fresh name each time: an earlier folder of the same digest may be on its way out.
    folder = parent / f"{digest.removeprefix('sha256:')}-{secrets.token_hex(6)}"
    extracted = extract_file(archive, folder, platform=running_platform())
    if extracted.lock != digest:
        remove_folder(folder)
        raise RuntimeError("the archive changed between hashing and extraction")
    return extracted.path, extracted.tree_digest


def remove_folder(folder: Path) -> None:
    """Remove an extracted folder; a folder already gone is fine, a failure is logged."""

    def report(function: Any, path: str, exc_info: Any) -> None:
        log.warning("could not remove %s of an artifact folder: %s", path, exc_info[0].__name__)

    if folder.exists():
        shutil.rmtree(folder, onerror=report)


def open_root(path: Path) -> None:
    """Create the artifacts directory (private) and drop uploads a previous run left unfinished."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    shutil.rmtree(path / UPLOADS, ignore_errors=True)


def stored_folders(tx: Tx) -> set[str]:
    """The folders of every stored artifact, in every workspace."""
    return {str(row.data["_folder"]) for row in tx.every(ARTIFACTS)}


def sweep(root: Path, kept: set[str]) -> None:
    """Remove extracted folders no artifact row names: a previous run stopped between extracting
    an archive and storing its row. Only names this module makes are touched."""
    for workspace in root.iterdir():
        if (
            not workspace.is_dir()
            or workspace.is_symlink()
            or not WORKSPACE_PATTERN.fullmatch(workspace.name)
        ):
            continue
        for folder in workspace.iterdir():
            if FOLDER_NAME.fullmatch(folder.name) and str(folder) not in kept and not folder.is_symlink():
                log.info("removing %s, extracted by an upload that was never stored", folder)
                remove_folder(folder)
