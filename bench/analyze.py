"""Benchmark: offline analyze of a generated bundle document just under the 5 MiB source cap.

Prints wall time and peak memory (the child process's max RSS, interpreter included, and the
Python heap peak from tracemalloc in a separate run). Target: under 1 s and under 250 MB.

    .venv/bin/python bench/analyze.py [--format yaml|json] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

CAP = 5 * 1024 * 1024


def render(doc: dict[str, Any], fmt: str) -> str:
    """The document as YAML or indented JSON text."""
    return yaml.safe_dump(doc, sort_keys=False) if fmt == "yaml" else json.dumps(doc, indent=2)


def generate(target: int, fmt: str = "yaml") -> dict[str, Any]:
    """A realistic document: MCPs, skills with real SKILL.md text, agents wired to both, and so on."""
    skill_body = "\n".join(
        f"{i}. Step {i}: read, decide, act; explain the label chosen." for i in range(1, 40)
    )
    doc: dict[str, Any] = {
        "schema_version": "0.1.0",
        "name": "bench-bundle",
        "version": "1.0.0",
        "description": "Generated for the analyze benchmark.",
        "setup": [{"key": "token", "label": "Token", "type": "secret"}],
        "mcps": [],
        "skills": [],
        "agents": [],
        "automations": [],
        "policies": [],
    }
    size = 0
    i = 0
    while size < target:
        doc["mcps"].append(
            {
                "key": f"mcp{i}",
                "name": f"Server {i}",
                "type": "command",
                "command": "npx",
                "args": ["-y", f"@acme/server-{i}", "--verbose"],
                "env": {"TOKEN": "${setup.token}", "REGION": "eu-west-1"},
            }
        )
        doc["skills"].append(
            {
                "key": f"skill{i}",
                "source_type": "inline",
                "content": (
                    f"---\nname: skill-{i}\ndescription: Skill number {i}\n---\n# Skill {i}\n{skill_body}\n"
                ),
            }
        )
        doc["agents"].append(
            {
                "key": f"agent{i}",
                "name": f"Agent {i}",
                "instructions": "Be brief. " * 20,
                "model": "gpt-4.1",
                "mcps": [f"mcp{i}"],
                "skills": [f"skill{i}"],
            }
        )
        doc["automations"].append(
            {
                "key": f"cron{i}",
                "type": "cron",
                "agent": f"agent{i}",
                "schedule": "0 8 * * 1-5",
                "timezone": "Europe/Berlin",
                "message": "Daily digest",
            }
        )
        doc["policies"].append(
            {"key": f"cap{i}", "type": "spend_cap", "agent": f"agent{i}", "config": {"limit_usd": 10}}
        )
        i += 1
        if i % 50 == 0:
            size = len(render(doc, fmt).encode())
    while len(render(doc, fmt).encode()) >= CAP:
        for section in ("mcps", "skills", "agents", "automations", "policies"):
            doc[section].pop()
    return doc


CHILD = """
import json, resource, sys, time
from pathlib import Path
from bundle_operator.document import parse_bundle_text
from bundle_operator.engine.analyze import analyze_offline
data = Path(sys.argv[1]).read_bytes()
started = time.perf_counter()
preview = analyze_offline(parse_bundle_text(data), {"token": "t"})
elapsed = time.perf_counter() - started
assert not preview.blocking, preview.issues[:3]
if len(sys.argv) > 2:
    import tracemalloc
    tracemalloc.start()
    analyze_offline(parse_bundle_text(data), {"token": "t"})
    heap = tracemalloc.get_traced_memory()[1]
else:
    heap = None
print(json.dumps({"seconds": elapsed, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "entities": len(preview.entities), "heap_peak": heap}))
"""


def run_child(path: Path, trace: bool = False) -> dict[str, Any]:
    argv = [sys.executable, "-c", CHILD, str(path)] + (["trace"] if trace else [])
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def baseline_rss() -> int:
    code = "import resource, bundle_operator.document, bundle_operator.engine.analyze;"
    code += "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    return int(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    doc = generate(CAP - 64 * 1024, args.format)
    text = render(doc, args.format)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"bundle.{args.format}"
        path.write_text(text)
        results = [run_child(path) for _ in range(args.runs)]
        traced = run_child(path, trace=True)
    seconds = [r["seconds"] for r in results]
    rss_mb = max(r["maxrss_kib"] for r in results) / 1024
    print(
        f"document: {args.format}, {len(text.encode()) / 1024 / 1024:.2f} MiB, "
        f"{results[0]['entities']} entities"
    )
    print(
        f"wall time: median {statistics.median(seconds):.3f} s, "
        f"min {min(seconds):.3f} s, max {max(seconds):.3f} s"
        f" over {args.runs} runs (target < 1 s)"
    )
    print(
        f"peak memory: {rss_mb:.0f} MB max RSS of the process (target < 250 MB); "
        f"{baseline_rss() / 1024:.0f} MB of it is the interpreter and imports; "
        f"Python heap peak during analyze {traced['heap_peak'] / 1024 / 1024:.0f} MB"
    )
    print(f"(this machine: {resource.getpagesize()} B pages; figures from one machine, not a timed test)")


if __name__ == "__main__":
    main()
