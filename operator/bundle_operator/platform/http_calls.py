"""HTTP to the platform API v1: retries, the call gate, and problem+json read as typed errors.

A call is repeated only when repeating it cannot do harm: connection failures and 429 (the
platform did not act), and 5xx or lost responses for GET, PUT, DELETE and creates that carry an
idempotency key. Request bodies are never logged or echoed in errors: they may hold secrets.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Awaitable, Callable, Mapping
from datetime import date, datetime
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote, unquote

import httpx
from opentelemetry.trace import SpanKind
from pydantic import BaseModel, SecretStr, ValidationError

from bundle_operator.platform.errors import PlatformError, Unavailable, error_for_status
from bundle_operator.platform.gate import OK, CallGate, CircuitOpen, Outcome
from bundle_operator.platform.models import Page, Problem
from bundle_operator.platform.retry import RetryPolicy, parse_retry_after
from bundle_operator.platform.routes import route_template
from bundle_operator.platform.sharing import SharedReads
from bundle_operator.telemetry import tracing

M = TypeVar("M", bound=BaseModel)

ENV_URL = "BUNDLE_PLATFORM_URL"
ENV_TOKEN = "BUNDLE_PLATFORM_TOKEN"
PROBLEM_JSON = "application/problem+json"

# Transport failures where the request never reached the platform: repeating is always safe.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# A pause of the whole platform at most this long is waited out inside one call; a longer one
# fails the call, so the reconcile reports the outage and backs off.
_WAIT_OUT_PAUSE = 2.0


def _wire_default(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"cannot send a {type(value).__name__}")


def encode_body(model: BaseModel, *, only_set: bool = False) -> bytes:
    """The JSON a model is sent as; secret fields carry their real values (they are write-only)."""
    data = model.model_dump(mode="python", exclude_unset=only_set)
    return json.dumps(data, default=_wire_default).encode()


def page_of(model: type[M]) -> type[Page[M]]:
    """The Page model whose items are ``model``."""
    return Page[model]  # type: ignore[valid-type]


def seg(value: str) -> str:
    return quote(value, safe="")


def _workspace_of(path: str) -> str:
    """The workspace segment of ``/v1/workspaces/{ws}/...`` as sent (quoted), or ''."""
    parts = path.split("/")
    return unquote(parts[3]) if len(parts) > 3 and parts[1:3] == ["v1", "workspaces"] else ""


class PlatformHttp:
    """HTTP to one platform with the retry policy, the call gate and typed errors."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float | httpx.Timeout = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
        gate: CallGate | None = None,
        shared: SharedReads | None = None,
    ) -> None:
        headers = {"Accept": f"application/json, {PROBLEM_JSON}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            transport=transport,
            event_hooks=dict(event_hooks) if event_hooks else None,
        )
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        # Shared with the other clients of the same platform (see k8s/platforms.py); None for the
        # CLI and tests, which call the platform directly.
        self.gate = gate
        self.shared = shared

    @classmethod
    def from_env(cls, **kwargs: Any) -> Self:
        """A client for ``$BUNDLE_PLATFORM_URL`` with ``$BUNDLE_PLATFORM_TOKEN``."""
        url = os.environ.get(ENV_URL)
        if not url:
            raise ValueError(f"{ENV_URL} is not set")
        return cls(url, token=os.environ.get(ENV_TOKEN) or None, **kwargs)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- transport --------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        safe: bool,
        http_timeout: httpx.Timeout | None = None,
    ) -> httpx.Response:
        """Send one call, repeating it per the retry policy; raises a PlatformError on failure.

        A body is JSON unless ``headers`` name its Content-Type; ``http_timeout`` replaces the client's own.
        """
        all_headers = dict(headers or {})
        if body is not None:
            all_headers.setdefault("Content-Type", "application/json")
        # Whether an earlier attempt may have been carried out although its answer was lost.
        maybe_done = False
        for attempt in range(self._retry.attempts):
            last = attempt == self._retry.attempts - 1
            try:
                response = await self._send(method, path, body, params, all_headers, http_timeout, attempt)
            except CircuitOpen as exc:
                if last or (exc.retry_after or 0.0) > _WAIT_OUT_PAUSE:
                    raise
                await self._sleep(exc.retry_after or 0.0)
                continue
            except _NOT_SENT as exc:
                error: PlatformError = Unavailable(
                    f"could not reach the platform at {self.base_url} ({type(exc).__name__})",
                    code="unreachable",
                )
                retryable = True
            except httpx.TransportError as exc:
                error = Unavailable(
                    f"the call to the platform at {self.base_url} failed ({type(exc).__name__})",
                    code="transport_error",
                )
                retryable = safe
                maybe_done = True
            else:
                if response.status_code < 400:
                    return response
                if response.status_code == 404 and method == "DELETE" and maybe_done:
                    # The earlier attempt deleted it and its answer was lost: the delete is done.
                    return response
                error = problem_error(response)
                maybe_done = maybe_done or response.status_code >= 500
                retryable = response.status_code == 429 or (response.status_code >= 500 and safe)
            if last or not retryable:
                raise error
            await self._sleep(self._retry.delay(attempt, error.retry_after, self._rng))
        raise AssertionError("unreachable")  # pragma: no cover - the loop always returns or raises

    async def _send(
        self,
        method: str,
        path: str,
        body: bytes | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        http_timeout: httpx.Timeout | None = None,
        attempt: int = 0,
    ) -> httpx.Response:
        """One HTTP call, through the platform's gate when there is one."""
        # httpx takes its own sentinel, not None, for "the client's timeout".
        timeout_arg: Any = http_timeout if http_timeout is not None else httpx.USE_CLIENT_DEFAULT

        async def request(sent: Mapping[str, str]) -> httpx.Response:
            return await self._http.request(
                method, path, content=body, params=params, headers=sent, timeout=timeout_arg
            )

        async def send() -> httpx.Response:
            if not tracing.enabled():
                return await request(headers)
            return await self._traced(method, path, headers, attempt, request)

        if self.gate is None:
            return await send()
        try:
            async with self.gate.slot() as report:
                try:
                    response = await send()
                except _NOT_SENT:
                    report(Outcome(overloaded=True))
                    raise
                except httpx.TransportError:
                    report(OK)
                    raise
                pause = response.headers.get("Retry-After")
                if response.status_code == 429 or (response.status_code == 503 and pause is not None):
                    report(Outcome(overloaded=True, retry_after=parse_retry_after(pause)))
                else:
                    report(OK)
                return response
        finally:
            if method != "GET" and self.shared is not None:
                self.shared.wrote(_workspace_of(path))

    async def _traced(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        attempt: int,
        request: Callable[[Mapping[str, str]], Awaitable[httpx.Response]],
    ) -> httpx.Response:
        """One attempt as a CLIENT span named by its route, its context sent as ``traceparent``.

        The name holds no ids or workspace (``routes.py``); the concrete URL is an attribute. A
        repeated call is one span per attempt, each with its ``http.request.resend_count``.
        """
        attributes: dict[str, tracing.AttributeValue | None] = {
            "http.request.method": method,
            "url.full": f"{self.base_url}{path}",
            "server.address": self._http.base_url.host,
            "http.request.resend_count": attempt or None,
        }
        with tracing.span(f"{method} {route_template(path)}", attributes, kind=SpanKind.CLIENT) as span:
            sent = dict(headers)
            tracing.inject(sent)
            try:
                response = await request(sent)
            except httpx.TransportError as exc:
                span.set_attribute("error.type", type(exc).__name__)
                raise
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 400:
                span.set_attribute("error.type", str(response.status_code))
                tracing.fail(f"HTTP {response.status_code}")
            return response

    async def _call(
        self,
        method: str,
        path: str,
        model: type[M],
        *,
        body: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        safe: bool,
        http_timeout: httpx.Timeout | None = None,
    ) -> M:
        response = await self.request(
            method, path, body=body, params=params, headers=headers, safe=safe, http_timeout=http_timeout
        )
        try:
            return model.model_validate(response.json())
        except (ValueError, ValidationError) as exc:
            raise PlatformError(
                f"the platform answered {method} {path} with a body that does not match the API: {exc}",
                status=response.status_code,
                code="bad_response",
            ) from None

    def _ws(self, workspace: str) -> str:
        return f"/v1/workspaces/{seg(workspace)}"

    def _gw(self, workspace: str, bundle_id: str) -> str:
        return f"{self._ws(workspace)}/gateway-bundles/{seg(bundle_id)}"

    async def health(self) -> bool:
        """True when the platform answers its health route."""
        await self.request("GET", "/healthz", safe=True)
        return True


def problem_error(response: httpx.Response) -> PlatformError:
    """The typed error for a failed response, read from its problem+json body when it has one."""
    status = response.status_code
    cls = error_for_status(status)
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    problem: Problem | None = None
    if response.headers.get("Content-Type", "").split(";")[0].strip() in (PROBLEM_JSON, "application/json"):
        try:
            problem = Problem.model_validate(response.json())
        except (ValueError, ValidationError):
            problem = None
    if problem is None:
        return cls(
            f"the platform answered HTTP {status} {response.reason_phrase}",
            status=status,
            code=f"http_{status}",
            retry_after=retry_after,
        )
    return cls(
        problem.detail,
        status=status,
        code=problem.code,
        errors=problem.errors,
        holders=problem.holders,
        retry_after=retry_after,
    )
