"""Benchmark `inspect` of .mcpb archives: throughput against sha256sum, and peak memory by size.

Builds archives in a temporary folder (never in the repository): a 128 MiB one shaped like a
real bundle (mostly already-compressed assets, some JavaScript) and a 16 MiB one of the same
shape. Prints:

- inspect throughput of the 128 MiB archive and `sha256sum` of the same file (best of 5 each),
  and their ratio (target: at least 0.8x); inspect includes copying the file once into its
  private snapshot while hashing it, which every later check reads instead of the file;
- the same for a text-heavy 128 MiB archive (all source code, ~2.3:1), which is bound by
  inflating every byte to count it (target: at least 0.8x too);
- each with the inflate codec in use (ISA-L where installed) and with zlib's, the fallback;
- peak resident memory of a fresh process inspecting the 16 MiB and the 128 MiB archive, over
  the same process's memory before inspecting (target: flat, i.e. not growing with the archive).

Run: `make bench-mcpb` or `.venv/bin/python bench/mcpb.py`.
"""

from __future__ import annotations

import json
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

MiB = 1024 * 1024
ROUNDS = 5

MANIFEST = {
    "manifest_version": "0.3",
    "name": "bench",
    "version": "1.0.0",
    "description": "A large bundle for the benchmark",
    "author": {"name": "Bench"},
    "server": {
        "type": "node",
        "entry_point": "server/index.js",
        "mcp_config": {"command": "node", "args": ["${__dirname}/server/index.js"]},
    },
}

JS = b"".join(
    f"export function h{i}(xs) {{ return xs.map((x) => x * {i} + 1).filter(Boolean); }}\n".encode()
    for i in range(2000)
)


def _source(rng: random.Random, size: int) -> bytes:
    """Source-like text that deflates about 2.3:1, like minified JavaScript does."""
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randrange(3, 10))) for _ in range(3000)]
    lines, total = [], 0
    while total < size:
        a, b, c, d = rng.choices(words, k=4)
        line = f"export const {a}_{rng.randrange(1000)} = ({b}, {c}) => {d}.{a}({rng.randrange(99999)});\n"
        lines.append(line)
        total += len(line)
    return "".join(lines).encode()


def build_archive(path: Path, target_bytes: int, seed: int = 7, text_heavy: bool = False) -> None:
    """About ``target_bytes``: 90% incompressible assets and 10% source, or all source if text-heavy."""
    rng = random.Random(seed)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("manifest.json", json.dumps(MANIFEST))
        zf.writestr("server/index.js", b"console.log('bench');\n")
        i = 0
        # The end records and central directory add well under 1 MiB after the last entry.
        while zf.fp is not None and zf.fp.tell() < target_bytes - MiB:
            if text_heavy:
                zf.writestr(f"server/lib/module{i}.js", _source(rng, rng.randrange(256 * 1024, 1024 * 1024)))
            elif i % 10 == 9:
                body = JS[: rng.randrange(64 * 1024, len(JS))]
                zf.writestr(f"server/lib/module{i}.js", body)
            else:
                zf.writestr(f"assets/blob{i}.bin", rng.randbytes(rng.randrange(64 * 1024, 512 * 1024)))
            i += 1


def best_of(fn: object, rounds: int = ROUNDS) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


_PEAK = """
import resource, sys, tracemalloc
from bundle_operator.mcpb import inspect_file
inspect_file(sys.argv[1], platform="linux")  # warm: imports and first-use caches
tracemalloc.start()
result = inspect_file(sys.argv[1], platform="linux")
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
assert result.verdict == "accepted", result.reason
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, traced)
"""


def peak_memory(path: Path) -> tuple[int, int]:
    """(peak RSS of the whole process, peak Python allocations during one inspect), in bytes."""
    out = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, check=True)
    rss, traced = out.stdout.split()
    return int(rss), int(traced)


def inspect_ratio(path: Path, sha256sum: str, rounds: int) -> tuple[float, float, dict[str, float]]:
    """(sha256sum seconds, inspect seconds with the codec in use, inspect seconds per codec)."""
    from bundle_operator.mcpb import inflate, inspect_file

    in_use = inflate.CODEC
    per_codec: dict[str, float] = {}
    try:
        for codec in dict.fromkeys([in_use, inflate.ZLIB]):
            inflate.CODEC = codec
            per_codec[codec.name] = best_of(lambda: inspect_file(path, platform="linux"), rounds)
    finally:
        inflate.CODEC = in_use
    sum_s = best_of(lambda: subprocess.run([sha256sum, str(path)], check=True, capture_output=True), rounds)
    return sum_s, per_codec[in_use.name], per_codec


def main() -> int:
    from bundle_operator.mcpb import inflate, inspect_file

    sha256sum = shutil.which("sha256sum")
    if sha256sum is None:
        print("sha256sum is not installed: nothing to compare with")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-mcpb-") as tmp:
        small, large, text = Path(tmp) / "16.mcpb", Path(tmp) / "128.mcpb", Path(tmp) / "text.mcpb"
        print("building archives in", tmp, "...", flush=True)
        build_archive(small, 16 * MiB)
        build_archive(large, 128 * MiB)
        build_archive(text, 128 * MiB, text_heavy=True)
        print(f"inflate codec: {inflate.CODEC.name} (the fallback, zlib, is measured beside it)")
        misses = 0
        for label, path, rounds in (("assets-heavy", large, ROUNDS), ("text-heavy", text, 3)):
            result = inspect_file(path, platform="linux")
            if result.verdict != "accepted":
                print(f"the {label} archive was refused: {result.code}: {result.reason}")
                return 1
            with zipfile.ZipFile(path) as zf:
                unpacked = sum(i.file_size for i in zf.infolist())
                entries = len(zf.infolist())
            size = path.stat().st_size
            sum_s, inspect_s, per_codec = inspect_ratio(path, sha256sum, rounds)
            ratio = sum_s / inspect_s
            misses += ratio < 0.8
            print(
                f"{label} archive: {size / MiB:.1f} MiB, {entries} entries, {unpacked / MiB:.1f} MiB unpacked"
            )
            for name, seconds in per_codec.items():
                print(
                    f"  inspect ({name}): {seconds * 1000:7.1f} ms  {size / MiB / seconds:7.1f} MiB/s"
                    f"  = {sum_s / seconds:.2f}x sha256sum"
                )
            print(f"  sha256sum:      {sum_s * 1000:7.1f} ms  {size / MiB / sum_s:7.1f} MiB/s")
            verdict = "meets" if ratio >= 0.8 else "MISSES"
            print(f"  {label} inspect throughput = {ratio:.2f}x sha256sum ({verdict} the 0.8x target)")

        peaks = {}
        for label, path in (("16 MiB", small), ("128 MiB", large)):
            rss, traced = peak_memory(path)
            peaks[label] = traced
            print(
                f"peak memory, {label:>7} archive: process RSS {rss / MiB:6.1f} MiB, "
                f"allocated by inspect {traced / MiB:5.2f} MiB"
            )
        growth = (peaks["128 MiB"] - peaks["16 MiB"]) / MiB
        flat = "flat" if abs(growth) < 1 else "NOT flat"
        print(f"inspect allocations from 16 to 128 MiB: {growth:+.2f} MiB ({flat})")
        print(f"mcpb: every archive kind at or above 0.8x sha256sum: {'yes' if not misses else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
