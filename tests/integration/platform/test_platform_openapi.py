"""The OpenAPI document: current with the models, covering exactly the server's routes, and
honoured by the server under a bounded schemathesis run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from platform_harness import TOKEN, PlatformProcess

from bundle_operator.platform.openapi_build import OPENAPI_PATH, render
from bundle_operator.reference_platform import ServerConfig, create_app
from bundle_operator.reference_platform.app import METRICS_ROUTE_NAME
from bundle_operator.reference_platform.gateway_mcp import CATALOG_ROUTE_NAME, METADATA_ROUTE_NAME, ROUTE_NAME
from bundle_operator.reference_platform.stdio_loopback import ROUTE_NAME as STDIO_ROUTE_NAME

pytestmark = pytest.mark.integration

SCHEMATHESIS = str(Path(sys.executable).with_name("st"))
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)


def test_the_checked_in_document_is_current() -> None:
    assert OPENAPI_PATH.read_text() == render(), (
        "openapi.yaml is stale: run python -m bundle_operator.platform.openapi_build > "
        "operator/bundle_operator/platform/openapi.yaml"
    )


def test_the_document_and_the_server_have_the_same_routes(tmp_path: Path) -> None:
    app = create_app(ServerConfig(db_path=tmp_path / "unused.db", fault_injection=True))
    served = {
        (route.method.lower(), route.resource.canonical)
        for route in app.router.routes()
        # The endpoints' MCP route speaks MCP, their RFC 9728 metadata is OAuth's, their catalogue is
        # read with an OAuth token, /metrics is Prometheus text and the stdio bridge is the gateway's
        # own way to the instances the platform runs: none of them is this REST API.
        if route.resource is not None
        and route.method != "HEAD"
        and route.name
        not in (ROUTE_NAME, METADATA_ROUTE_NAME, CATALOG_ROUTE_NAME, METRICS_ROUTE_NAME, STDIO_ROUTE_NAME)
    }
    document = yaml.safe_load(OPENAPI_PATH.read_text())
    documented = {(method, path) for path, ops in document["paths"].items() for method in ops}
    assert served == documented


def test_the_server_honours_the_document_under_generated_requests(
    platform: PlatformProcess, tmp_path: Path
) -> None:
    # Bounded for two shared cores: a fixed seed and a few examples per operation; the fault
    # admin routes are left out because arming random faults would fail the other operations.
    command = [
        SCHEMATHESIS,
        "run",
        str(OPENAPI_PATH),
        "--url",
        platform.url,
        "--header",
        f"Authorization: Bearer {TOKEN}",
        "--max-examples",
        "8",
        "--seed",
        "20261129",
        # One worker: hypothesis parses schemathesis' sources in each thread to describe its
        # filter lambdas, and on Python 3.11.7 two threads building ASTs at once can fail with
        # "SystemError: AST constructor recursion depth mismatch" (the counter is shared).
        "--workers",
        "1",
        "--phases",
        "coverage,fuzzing,stateful",
        "--checks",
        CHECKS,
        "--exclude-path-regex",
        "^/_admin",
        "--warnings",
        "off",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=400, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert " passed" in output and "failed" not in output.split("SUMMARY")[-1], output[-3000:]
