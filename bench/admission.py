"""Benchmark: admission latency of the validating webhook, for a small and the largest accepted document.

Serves the webhook in this process over HTTPS on loopback (a throwaway CA), exactly as
``operator run --webhook-port`` does, and posts AdmissionReviews of a Bundle with an inline
document, one at a time over one kept-alive connection, as the API server sends them. Prints
p50/p99/max per document and this process's peak RSS (the webhook's own memory: an operator with
the webhook on carries it on top of its reconcilers).

Target (issue 25): p99 under 1 s for the largest accepted document on this machine. Two documents
built to make a backtracking pattern slow (issue 45) are measured too: a prompt of "{{" and 60,000
spaces (cubic in the old placeholder pattern: 11.6 s at 2,500) and sixty setup descriptions of
unclosed "${setup." openings (quadratic: 4.2 s); each must be judged as fast as a document of its size.

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
from bundle_operator.k8s.webhook.server import serve_webhook  # noqa: E402

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


def braces() -> dict[str, Any]:
    """A gateway prompt of "{{" and spaces, just under the 64 KiB a prompt's text may have."""
    member = {"key": "w", "name": "W", "type": "url", "endpoint_url": "https://w.example.com/mcp"}
    prompt = {"name": "p", "messages": [{"role": "user", "text": "{{" + " " * 60_000}]}
    return bundle_document(
        "braces-kit", mcps=[member], gateway={"description": "d", "members": ["w"], "prompts": [prompt]}
    )


def openings() -> dict[str, Any]:
    """Sixty setup descriptions of 12 KB of "${setup." openings that never close."""
    fields = [
        {"key": f"k{i}", "label": "L", "type": "string", "required": False, "description": "${setup." * 1_500}
        for i in range(60)
    ]
    return bundle_document("openings-kit", setup=fields)


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
                docs = {"small": small(), "largest": largest(), "braces": braces(), "openings": openings()}
                await measure(client, url, docs["small"], 5)  # warm up: imports, TLS session
                results = {
                    "small": await measure(client, url, docs["small"], args.requests),
                    "largest": await measure(client, url, docs["largest"], args.large_requests),
                    "braces": await measure(client, url, docs["braces"], args.large_requests),
                    "openings": await measure(client, url, docs["openings"], args.large_requests),
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
    hostile = max(p99(results["braces"]), p99(results["openings"]))
    print(f"admission: hostile documents p99 {hostile * 1000:.0f} ms (target < 1000 ms)")
    return 0 if largest_p99 < 1.0 and hostile < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
