"""Benchmark: admission latency of the validating webhook, for a small and the largest accepted document.

Serves the webhook in this process over HTTPS on loopback (a throwaway CA), exactly as
``operator run --webhook-port`` does, and posts AdmissionReviews of a Bundle with an inline
document, one at a time over one kept-alive connection, as the API server sends them. Prints
p50/p99/max per document and this process's peak RSS (the webhook's own memory: an operator with
the webhook on carries it on top of its reconcilers).

Target (issue 25): p99 under 1 s for the largest accepted document on this machine.

    .venv/bin/python bench/admission.py [--requests 200] [--large-requests 30]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.documents import TOKEN_SETUP, bundle_document, github_mcp  # noqa: E402
from tests.tls import throwaway_tls  # noqa: E402

from bundle_operator.document.source import MAX_SOURCE_BYTES, data_size  # noqa: E402
from bundle_operator.k8s.webhook import serve_webhook  # noqa: E402

SKILL_BYTES = 4000


class NoBundles:
    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None


def small() -> dict[str, Any]:
    """The size of a typical bundle: a handful of entities."""
    return bundle_document(
        "small-kit",
        setup=TOKEN_SETUP,
        mcps=[github_mcp()],
        skills=[
            {
                "key": "triage",
                "source_type": "inline",
                "content": "---\nname: triage\ndescription: d\n---\nBody\n",
            }
        ],
        agents=[{"key": "bot", "name": "Bot", "mcps": ["gh"], "skills": ["triage"]}],
    )


def largest() -> dict[str, Any]:
    """Inline skills added until one more would pass the document size limit."""
    body = "x" * SKILL_BYTES
    skills: list[dict[str, Any]] = []
    document = bundle_document("large-kit", skills=skills)
    while True:
        n = len(skills)
        skills.append(
            {
                "key": f"s{n}",
                "source_type": "inline",
                "content": f"---\nname: s{n}\ndescription: d\n---\n{body}\n",
            }
        )
        if data_size(document) > MAX_SOURCE_BYTES:
            skills.pop()
            return document


def review(document: dict[str, Any], uid: int) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uid),
                "kind": {"group": "bundle-operator.dev", "version": "v1alpha1", "kind": "Bundle"},
                "namespace": "bench",
                "operation": "CREATE",
                "object": {"metadata": {"name": document["name"]}, "spec": {"source": {"inline": document}}},
            },
        }
    ).encode()


async def measure(client: httpx.AsyncClient, url: str, document: dict[str, Any], count: int) -> list[float]:
    body = review(document, 0)
    seconds: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        answer = await client.post(url, content=body, headers={"Content-Type": "application/json"})
        seconds.append(time.perf_counter() - started)
        verdict = answer.json()["response"]
        if not verdict["allowed"]:
            raise SystemExit(
                f"the {document['name']} document was refused: {verdict['status']['message'][:300]}"
            )
    return seconds


def p99(seconds: list[float]) -> float:
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def line(name: str, size: int, seconds: list[float]) -> str:
    p50, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
    return (
        f"{name:<8} {size / 1024:>8.1f} KiB  n={len(seconds):<4} p50 {p50:7.1f} ms"
        f"  p99 {p99(seconds) * 1000:7.1f} ms  max {worst:7.1f} ms"
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--large-requests", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        tls = throwaway_tls(tmp)
        (tmp / "tls.crt").write_bytes(tls.cert.read_bytes())
        (tmp / "tls.key").write_bytes(tls.key.read_bytes())
        runner = await serve_webhook("127.0.0.1", 0, tmp, NoBundles())
        url = f"https://127.0.0.1:{runner.addresses[0][1]}/validate"
        try:
            async with httpx.AsyncClient(verify=tls.client_context(), timeout=30) as client:
                docs = {"small": small(), "largest": largest()}
                await measure(client, url, docs["small"], 5)  # warm up: imports, TLS session
                results = {
                    "small": await measure(client, url, docs["small"], args.requests),
                    "largest": await measure(client, url, docs["largest"], args.large_requests),
                }
        finally:
            await runner.cleanup()
    for name, seconds in results.items():
        print(line(name, data_size(docs[name]), seconds))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    largest_p99 = sorted(results["largest"])[
        min(len(results["largest"]) - 1, int(len(results["largest"]) * 0.99))
    ]
    print(f"peak RSS of this process (webhook and client) {rss:.0f} MB")
    print(f"admission: largest p99 {largest_p99 * 1000:.0f} ms (target < 1000 ms); peak RSS {rss:.0f} MB")
    return 0 if largest_p99 < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
