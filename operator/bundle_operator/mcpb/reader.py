"""Read an .mcpb archive without unpacking or running it, and say whether it is accepted.

One pass copies the file into a private snapshot while hashing it (see ``snapshot``); everything
after reads only that copy: the signed content's digest when there is a signature, then every
entry inflated in memory-flat chunks, counting real bytes. Nothing is written but the anonymous
snapshot, which is gone when the call returns.
The verdict is ``accepted``, ``not_runnable`` (a uv bundle: read, never run) or ``refused``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import BinaryIO, Literal

from bundle_operator.mcpb import signature
from bundle_operator.mcpb.container import Layout, content_digest, read_layout
from bundle_operator.mcpb.entries import Entry, check_entries, check_relative_path
from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.executables import HEAD_BYTES, executable_platform
from bundle_operator.mcpb.inflate import RandomAccess, Stopped, UnpackCounter, data_ranges, stream_entry
from bundle_operator.mcpb.launch import (
    PLATFORMS,
    LaunchConfig,
    check_launch,
    check_platform,
    effective_config,
    program_path,
)
from bundle_operator.mcpb.limits import DEFAULT_LIMITS, Limits
from bundle_operator.mcpb.manifest import Manifest, parse_manifest
from bundle_operator.mcpb.setup_fields import SetupField, setup_fields
from bundle_operator.mcpb.signature import SignatureResult
from bundle_operator.mcpb.snapshot import Snapshot, snapshot_open, snapshot_path
from bundle_operator.mcpb.zipindex import read_central_directory

Verdict = Literal["accepted", "not_runnable", "refused"]
MANIFEST_NAME = "manifest.json"
INFLATE_WORKERS = 2  # the operator's pod and the CI machine have two cores
PARALLEL_FROM_BYTES = 4 * 1024 * 1024


def running_platform() -> str:
    """This computer's platform as MCPB names it (darwin, linux or win32)."""
    if sys.platform.startswith("linux"):
        return "linux"
    return sys.platform


@dataclass(frozen=True)
class ManifestSummary:
    """What a person reviewing the bundle needs to see of its manifest, for one platform."""

    name: str
    version: str
    manifest_version: str
    server_type: str
    entry_point: str
    command: str
    args: list[str]
    env: dict[str, str]
    platforms: list[str]


@dataclass
class Inspection:
    """The verdict on one archive, and what extraction and conversion reuse from reading it.

    ``sha256`` is of the snapshot that was judged; it is empty only when the file was refused
    before a byte of it was read (not a regular file, or over the size limit).
    """

    verdict: Verdict
    code: str | None
    reason: str | None
    sha256: str
    platform: str
    manifest: ManifestSummary | None = None
    signature: SignatureResult | None = None
    setup: list[SetupField] = field(default_factory=list)
    parsed_manifest: Manifest | None = None
    launch: LaunchConfig | None = None
    entries: list[Entry] = field(default_factory=list)
    layout: Layout | None = None
    data_starts: dict[int, int] = field(default_factory=dict)
    # A binary server's program: the <os>/<arch> its header says it was built for (None: unknown).
    program_platform: str | None = None

    @property
    def refused(self) -> bool:
        """Whether the archive was refused."""
        return self.verdict == "refused"


def inspect_file(
    path: str | os.PathLike[str],
    *,
    platform: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Inspection:
    """Read and verify the archive at ``path``.

    Raises ``OSError`` only when the file cannot be opened or read; everything about its content,
    its type (a device or a pipe) or its size is a refused ``Inspection``, never an exception.
    """
    return _inspected(lambda: snapshot_path(path, limits), platform, limits)


def inspect_open(
    f: BinaryIO,
    *,
    platform: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Inspection:
    """Like ``inspect_file`` on an open binary file or ``io.BytesIO``; raises only ``OSError``.

    A file is copied once into a private snapshot first (bytes in memory are read as they are).
    """
    return _inspected(lambda: snapshot_open(f, limits), platform, limits)


def _inspected(
    snapshot: Callable[[], AbstractContextManager[Snapshot]],
    platform: str | None,
    limits: Limits,
) -> Inspection:
    """Inspect the snapshot ``snapshot`` takes; one refused before it was read has no SHA-256."""
    try:
        with snapshot() as snap:
            return inspect_snapshot(snap, platform=platform, limits=limits)
    except Refused as refusal:
        platform = platform or running_platform()
        return Inspection(
            verdict="refused", code=refusal.code, reason=refusal.reason, sha256="", platform=platform
        )


def inspect_snapshot(
    snap: Snapshot,
    *,
    platform: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> Inspection:
    """Inspect an archive's snapshot; extraction calls this and then unpacks the same snapshot."""
    result = Inspection(verdict="refused", code=None, reason=None, sha256=snap.sha256, platform="")
    result.platform = platform or running_platform()
    try:
        _read(snap, result, limits)
    except Refused as refusal:
        result.verdict, result.code, result.reason = "refused", refusal.code, refusal.reason
    except OSError:
        raise
    except Exception as exc:
        # Last line of defence: hostile input that reaches a check nobody foresaw is refused, never a
        # traceback (the CLI's JSON contract must hold). OSError is the one failure that is not the
        # archive's fault, so it still propagates.
        result.verdict, result.code = "refused", "unreadable"
        result.reason = f"the archive could not be read ({type(exc).__name__})"
    return result


def _read(snap: Snapshot, result: Inspection, limits: Limits) -> None:
    f, size = snap.file, snap.size
    try:
        layout = read_layout(f, size, limits)
    except Refused as refusal:
        if refusal.code == "signature_invalid":
            result.signature = SignatureResult(status="invalid", detail=refusal.reason)
        raise
    result.layout = layout

    parsed: signature.ParsedSignature | SignatureResult | None = None
    if layout.signature_der is not None:
        parsed = signature.parse(layout.signature_der)
    if parsed is None:
        result.signature = signature.UNSIGNED
    elif isinstance(parsed, SignatureResult):
        result.signature = parsed
    else:
        result.signature = signature.verify(parsed, content_digest(f, layout, parsed.digest_algorithm))
    if result.signature.refuses:
        code = f"signature_{result.signature.status}"
        raise Refused(code, result.signature.detail or "the signature does not verify")

    entries = check_entries(read_central_directory(f, layout, limits.max_path_bytes), limits)
    result.entries = entries
    files = {e.name: e for e in entries if not e.is_dir}
    manifest_entry = files.get(MANIFEST_NAME)
    if manifest_entry is None:
        raise Refused("manifest_missing", "the archive has no manifest.json at its root")
    if manifest_entry.uncompressed_size > limits.max_manifest_bytes:
        raise Refused("manifest_too_large", f"manifest.json is larger than {limits.max_manifest_bytes} bytes")
    result.data_starts = data_ranges(f, entries, layout.cd_offset)
    manifest_bytes = _inflate_all(f, entries, result.data_starts, limits)

    manifest = parse_manifest(manifest_bytes)
    result.parsed_manifest = manifest
    launch = effective_config(manifest.server.mcp_config, result.platform)
    result.launch = launch
    compatibility = manifest.compatibility
    declared_platforms = compatibility.platforms if compatibility else None
    supported: list[str] = list(declared_platforms) if declared_platforms is not None else list(PLATFORMS)
    result.manifest = ManifestSummary(
        name=manifest.name,
        version=manifest.version,
        manifest_version=manifest.effective_version,
        server_type=manifest.server.type,
        entry_point=manifest.server.entry_point,
        command=launch.command,
        args=launch.args,
        env=launch.env,
        platforms=supported,
    )
    _check_manifest_rules(manifest, launch, result, set(files), limits)
    if result.verdict == "accepted" and manifest.server.type == "binary":
        program = program_path(launch.command, result.platform, limits)
        entry = files.get(program) if program is not None else None
        if entry is not None:
            head = _head_of(f, entry, result.data_starts[entry.local_offset], limits)
            result.program_platform = executable_platform(head)


def _inflate_all(f: BinaryIO, entries: list[Entry], starts: dict[int, int], limits: Limits) -> bytes:
    """Inflate every file entry, keeping only the manifest's bytes.

    Inflating is most of the work on compressible archives and the codec (ISA-L or zlib) lets go
    of the GIL, so big archives are split between a few threads. The refusal reported is the one
    of the earliest entry in the archive, exactly as a single pass in archive order would report it.
    """
    source = RandomAccess(f)
    counter = UnpackCounter(limits)
    manifest = bytearray()
    files = sorted((e for e in entries if not e.is_dir), key=lambda e: e.local_offset)

    def sink_for(entry: Entry) -> Callable[[bytes], None] | None:
        return manifest.extend if entry.name == MANIFEST_NAME else None

    workers = min(INFLATE_WORKERS, os.cpu_count() or 1)
    if workers < 2 or sum(e.compressed_size for e in files) < PARALLEL_FROM_BYTES:
        for entry in files:
            stream_entry(source, entry, starts[entry.local_offset], counter, sink_for(entry))
        return bytes(manifest)

    lock = threading.Lock()
    refusals: list[tuple[int, Refused]] = []

    def first_bad() -> float:
        with lock:
            return min((offset for offset, _ in refusals), default=math.inf)

    def run(batch: list[Entry]) -> None:
        for entry in batch:
            offset = entry.local_offset
            try:
                stream_entry(
                    source,
                    entry,
                    starts[offset],
                    counter,
                    sink_for(entry),
                    lambda at=offset: at > first_bad(),  # type: ignore[misc]
                )
            except Stopped:
                return
            except Refused as refusal:
                with lock:
                    refusals.append((offset, refusal))
                return

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mcpb-inflate") as pool:
        list(pool.map(run, _balanced(files, workers)))
    if refusals:
        raise min(refusals, key=lambda item: item[0])[1]
    return bytes(manifest)


def _head_of(f: BinaryIO, entry: Entry, start: int, limits: Limits) -> bytes:
    """The first bytes of one entry (a binary server's program), inflated no further than needed;
    the whole pass before already checked every entry."""
    head = bytearray()

    def keep(chunk: bytes) -> None:
        head.extend(chunk[: HEAD_BYTES - len(head)])

    with contextlib.suppress(Stopped):
        stream_entry(
            RandomAccess(f), entry, start, UnpackCounter(limits), keep, lambda: len(head) >= HEAD_BYTES
        )
    return bytes(head)


def _balanced(files: list[Entry], workers: int) -> list[list[Entry]]:
    """Split entries into ``workers`` batches of about equal compressed size, each in archive order."""
    batches: list[list[Entry]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for entry in sorted(files, key=lambda e: e.compressed_size, reverse=True):
        lightest = loads.index(min(loads))
        batches[lightest].append(entry)
        loads[lightest] += entry.compressed_size
    return [sorted(batch, key=lambda e: e.local_offset) for batch in batches]


def _check_manifest_rules(
    manifest: Manifest,
    launch: LaunchConfig,
    result: Inspection,
    files: set[str],
    limits: Limits,
) -> None:
    compatibility = manifest.compatibility
    check_platform(compatibility.platforms if compatibility else None, result.platform)
    server = manifest.server
    try:
        entry_point = check_relative_path(server.entry_point, "server.entry_point", limits)
    except Refused as refusal:
        raise Refused("entry_point", refusal.reason) from None
    if entry_point not in files:
        raise Refused(
            "entry_point", f"server.entry_point '{server.entry_point}' is not a file in the archive"
        )
    result.setup = setup_fields(manifest.user_config)
    user_keys = set((manifest.user_config or {}).keys())
    if server.type == "uv":
        # uv installs packages when it starts, so nothing here decides what runs: read, never run.
        result.verdict, result.code = "not_runnable", "uv_not_runnable"
        result.reason = "uv bundles install packages when they start; this one is read but not run"
        return
    check_launch(launch, result.platform, files, user_keys, limits)
    result.verdict, result.code, result.reason = "accepted", None, None
