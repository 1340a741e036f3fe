"""Size limits for .mcpb archives, as numbers a caller may tighten (tests do) but never loosen."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """How big an archive may be, on disk and unpacked."""

    max_file_bytes: int = 128 * MiB
    max_unpacked_bytes: int = 512 * MiB
    max_files: int = 20_000
    max_manifest_bytes: int = 1 * MiB
    # A signature block holds a CMS structure with a few certificates; anything near this is not one.
    max_signature_bytes: int = 1 * MiB
    max_path_bytes: int = 1024
    max_name_component_bytes: int = 255
    # Real bundles nest a dozen folders deep (node_modules included); deeper is only ever a way to
    # make every per-path check cost more.
    max_path_depth: int = 64


DEFAULT_LIMITS = Limits()
