"""Routes of a workspace's artifacts: upload an archive by its digest, read, list and delete them.

An upload is received in chunks into a private file, hashed on the way and cut off at the
limit, so the server never holds more than one chunk of it in memory. Disk and extraction work
runs in threads, off the event loop.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from aiohttp import web

from bundle_operator.mcpb.errors import Refused
from bundle_operator.reference_platform.artifact_files import (
    ARTIFACTS,
    DIGEST,
    ID_PREFIX,
    Upload,
    artifact_data,
    artifact_row,
    artifact_view,
    extract_upload,
    referenced_by,
    references,
    remove_folder,
)
from bundle_operator.reference_platform.entity_routes import BASE
from bundle_operator.reference_platform.http import (
    context,
    encode_cursor,
    json_response,
    page,
    seq_page,
    workspace,
)
from bundle_operator.reference_platform.problems import ApiError, conflict, field_error, not_found, refused
from bundle_operator.reference_platform.storage import Tx, new_id

COLLECTION = f"{BASE}/artifacts"
ITEM = f"{COLLECTION}/{{digest}}"
# An upload's path, matched before routing to apply the artifact limit instead of the API's own.
UPLOAD_PATH = re.compile(r"/v1/workspaces/[^/]+/artifacts/[^/]+")
_CHUNK = 256 * 1024


def too_large(limit: int) -> ApiError:
    """The 413 for an archive over the limit."""
    return ApiError(413, "too_large", f"the archive is larger than {limit} bytes, the most an artifact holds")


def _digest(request: web.Request) -> str:
    digest = request.match_info["digest"]
    if not DIGEST.fullmatch(digest):
        raise refused("digest", "must be sha256: and 64 lowercase hex digits")
    return digest


async def _receive(request: web.Request, upload: Upload, limit: int) -> str:
    """Write the body into ``upload`` and return its digest; 413 as soon as it passes ``limit``."""
    received = 0
    async for chunk in request.content.iter_chunked(_CHUNK):
        received += len(chunk)
        if received > limit:
            raise too_large(limit)
        await asyncio.to_thread(upload.write, chunk)
    return await asyncio.to_thread(upload.finish)


async def put_artifact(request: web.Request) -> web.Response:
    """PUT .../artifacts/{digest}: store an archive; 201 when new, 200 with the same entity after."""
    ctx, ws = context(request), workspace(request)
    digest = _digest(request)
    limit = ctx.config.artifact_max_bytes
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)
    root = ctx.artifacts()
    upload = await asyncio.to_thread(Upload, root)
    try:
        actual = await _receive(request, upload, limit)
        if actual != digest:
            raise ApiError(
                422,
                "digest_mismatch",
                f"the body hashes to {actual}, not to the digest in the path",
                errors=[field_error("digest", f"the body hashes to {actual}")],
            )

        def stored(tx: Tx) -> dict[str, Any] | None:
            row = artifact_row(tx, ws, digest)
            return None if row is None else artifact_view(row, referenced_by(tx, ws, digest))

        earlier = await ctx.store.transact(stored)
        if earlier is not None:
            return json_response(earlier)
        try:
            folder, tree = await asyncio.to_thread(extract_upload, root, ws, digest, upload.path)
        except Refused as exc:
            raise ApiError(
                422,
                "artifact_refused",
                f"the archive was refused ({exc.code}): {exc.reason}",
                errors=[field_error("body", f"{exc.code}: {exc.reason}")],
            ) from None
        size = upload.size
    finally:
        await asyncio.to_thread(upload.discard)

    def store(tx: Tx) -> tuple[dict[str, Any], bool]:
        # Another upload of the same digest may have finished first: its entity stands.
        again = stored(tx)
        if again is not None:
            return again, False
        row = tx.insert(ws, ARTIFACTS, new_id(ID_PREFIX), artifact_data(size, tree, folder), name=digest)
        return artifact_view(row, []), True

    try:
        shown, created = await ctx.store.transact(store)
    except BaseException:
        await asyncio.to_thread(remove_folder, folder)
        raise
    if not created:
        await asyncio.to_thread(remove_folder, folder)
    return json_response(shown, status=201 if created else 200)


async def get_artifact(request: web.Request) -> web.Response:
    """GET .../artifacts/{digest}: the artifact's metadata and who refers to it."""
    ctx, ws = context(request), workspace(request)
    digest = _digest(request)

    def read(tx: Tx) -> dict[str, Any]:
        row = artifact_row(tx, ws, digest)
        if row is None:
            raise not_found(digest)
        return artifact_view(row, referenced_by(tx, ws, digest))

    return json_response(await ctx.store.transact(read))


async def list_artifacts(request: web.Request) -> web.Response:
    """GET .../artifacts: a page of artifacts in upload order."""
    ctx, ws = context(request), workspace(request)
    limit, after_seq = seq_page(request)

    def read(tx: Tx) -> tuple[list[dict[str, Any]], str | None]:
        rows = tx.select(ws, ARTIFACTS, after_seq=after_seq, limit=limit + 1)
        users = references(tx, ws)
        shown = [artifact_view(row, users.get(row.key, [])) for row in rows[:limit]]
        return shown, encode_cursor(str(rows[limit - 1].seq)) if len(rows) > limit else None

    items, cursor = await ctx.store.transact(read)
    return page(items, cursor)


async def delete_artifact(request: web.Request) -> web.Response:
    """DELETE .../artifacts/{digest}: remove it and its folder; 409 while a server spec refers to it."""
    ctx, ws = context(request), workspace(request)
    digest = _digest(request)

    def remove(tx: Tx) -> Path:
        row = artifact_row(tx, ws, digest)
        if row is None:
            raise not_found(digest)
        users = referenced_by(tx, ws, digest)
        if users:
            raise conflict(
                "artifact_in_use",
                f"{digest} is used by the MCP server specs {', '.join(users)}; delete or change those first",
                holders=users,
            )
        tx.delete(row.id)
        return Path(row.data["_folder"])

    folder = await ctx.store.transact(remove)
    # The row goes first: a launch never finds a row whose folder is half removed.
    await asyncio.to_thread(remove_folder, folder)
    return web.Response(status=204)


def register(app: web.Application) -> None:
    """Add the artifact routes."""
    app.router.add_get(COLLECTION, list_artifacts)
    app.router.add_put(ITEM, put_artifact)
    app.router.add_get(ITEM, get_artifact)
    app.router.add_delete(ITEM, delete_artifact)
