"""A small async client of the Kubernetes API: the reads, patches and preconditioned writes the
reconcilers need, over aiohttp so no handler blocks the event loop.

Connection settings come from the official client's loaders (``KUBECONFIG`` or the in-cluster
service account), which handle every kubeconfig form; the calls themselves are plain JSON.

aiohttp rather than httpx: at fleet scale the operator spends most of its time in this client,
and httpx/httpcore cost about 15 times the CPU per request (its pool scans every connection on
every request); kopf itself talks to the API server with aiohttp.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from bundle_operator.k8s.process.metrics import METRICS, kube_resource
from bundle_operator.k8s.resources import API_VERSION, INSTALLATION_PLURAL

# The list as metadata only: a check of versions need not carry every spec and status.
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"


class KubeError(Exception):
    """The API server refused a call or could not be reached."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def conflict(self) -> bool:
        """A resourceVersion precondition failed: someone else wrote first."""
        return self.status == 409

    @property
    def not_found(self) -> bool:
        """The object does not exist."""
        return self.status == 404


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate."""

    host: str
    verify: ssl.SSLContext | bool
    cert: tuple[str, str] | None = None
    token: str | None = None
    # In a pod: the projected service-account token, which the kubelet rotates; read again on use.
    token_file: str | None = None


# Where the kubelet projects a pod's service-account token (the official client's constant).
IN_CLUSTER_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
TOKEN_REREAD_SECONDS = 60.0


def bearer_token(api_key: dict[str, Any]) -> str | None:
    """The bearer token the official client's loaders put into ``Configuration.api_key``: under
    ``BearerToken`` (current clients, kubeconfig ``token`` and in-cluster alike) or
    ``authorization`` (older ones), prefixed with ``Bearer `` or ``bearer ``."""
    value = api_key.get("BearerToken") or api_key.get("authorization")
    if not value:
        return None
    text = str(value).strip()
    if text[:7].lower() == "bearer ":
        text = text[7:].strip()
    return text or None


def load_connection() -> Connection:
    """Read the connection from ``KUBECONFIG`` (or ~/.kube/config), else the in-cluster account."""
    from kubernetes import config as kube_config
    from kubernetes.client import Configuration

    cfg = Configuration()
    token_file = None
    try:
        # KUBECONFIG as it is now: the library reads its default once, when it is first imported.
        kube_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.environ.get("KUBECONFIG") or None, client_configuration=cfg
        )
    except kube_config.ConfigException:
        kube_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        token_file = IN_CLUSTER_TOKEN_FILE
    verify: ssl.SSLContext | bool = cfg.verify_ssl
    if cfg.verify_ssl and cfg.ssl_ca_cert:
        verify = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    cert = (cfg.cert_file, cfg.key_file) if cfg.cert_file and cfg.key_file else None
    token = bearer_token(cfg.api_key)
    if isinstance(verify, ssl.SSLContext) and cert is not None:
        verify.load_cert_chain(*cert)
        cert = None
    return Connection(host=cfg.host.rstrip("/"), verify=verify, cert=cert, token=token, token_file=token_file)


class TokenFileAuth:
    """``Authorization: Bearer`` from a token file, read again once a minute (the official client's
    period), so a rotated projected token is used before the old one expires. A failed read keeps
    the last token."""

    def __init__(self, path: str, token: str | None, every: float = TOKEN_REREAD_SECONDS) -> None:
        self._path = Path(path)
        self._token = token
        self._every = every
        self._read_at = time.monotonic() if token else float("-inf")

    def current(self) -> str | None:
        """The token to send now."""
        now = time.monotonic()
        if now - self._read_at >= self._every:
            self._read_at = now
            with contextlib.suppress(OSError):
                self._token = self._path.read_text().strip() or self._token
        return self._token


def _ssl_context(connection: Connection) -> ssl.SSLContext | bool:
    """What aiohttp verifies the API server with (and presents, for a client certificate)."""
    if connection.host.startswith("http://"):
        return False
    verify = connection.verify
    if verify is False:
        return False
    context = verify if isinstance(verify, ssl.SSLContext) else ssl.create_default_context()
    if connection.cert is not None:
        context.load_cert_chain(*connection.cert)
    return context


def _q(part: str) -> str:
    return quote(part, safe="")


# Requests in flight to the API server at most, from one client (kopf's own watches aside).
MAX_CONNECTIONS = 32


class Kube:
    """The calls the operator makes; every method is a single API request."""

    def __init__(self, connection: Connection, *, timeout: float = 30.0) -> None:
        self._host = connection.host
        self._headers = {"Accept": "application/json"}
        self._auth: TokenFileAuth | None = None
        if connection.token_file:
            self._auth = TokenFileAuth(connection.token_file, connection.token)
        elif connection.token:
            self._headers["Authorization"] = f"Bearer {connection.token}"
        self._ssl = _ssl_context(connection)
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        # Made on first use: an aiohttp session belongs to the running event loop.
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                # Every connection kept alive, and at most this many requests in flight to the API
                # server from one client (kopf's own watches aside).
                limit=MAX_CONNECTIONS,
                keepalive_timeout=60,
                ssl=self._ssl,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout
            )
        return self._session

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content_type: str | None = None,
        accept: str | None = None,
    ) -> dict[str, Any]:
        headers = {} if accept is None else {"Accept": accept}
        content = None
        if json_body is not None:
            content = json.dumps(json_body).encode()
            headers["Content-Type"] = content_type or "application/json"
        if self._auth is not None:
            token = self._auth.current()
            if token:
                headers["Authorization"] = f"Bearer {token}"
        METRICS.kube_requests.labels(method, kube_resource(path)).inc()
        try:
            async with self._http().request(
                method, self._host + path, data=content, headers=headers
            ) as response:
                status = response.status
                raw = await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise KubeError(0, "Unreachable", type(exc).__name__) from None
        if status >= 400:
            try:
                body = json.loads(raw)
                reason, message = str(body.get("reason", "")), str(body.get("message", ""))
            except (ValueError, AttributeError):
                reason, message = "", raw[:200].decode("utf-8", "replace")
            raise KubeError(status, reason, message)
        try:
            data: dict[str, Any] = json.loads(raw)
        except ValueError:
            raise KubeError(
                status, "BadResponse", "the API server answered with a body that is not JSON"
            ) from None
        return data

    # --- core objects --------------------------------------------------------------------------

    async def read(self, path: str) -> dict[str, Any] | None:
        """GET an object by its API path; None when it does not exist."""
        try:
            return await self._call("GET", path)
        except KubeError as exc:
            if exc.not_found:
                return None
            raise

    async def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap, or None."""
        return await self.read(f"/api/v1/namespaces/{_q(namespace)}/configmaps/{_q(name)}")

    async def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Secret, or None."""
        return await self.read(f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}")

    async def create(self, collection: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST an object to a collection path; 409 when it exists."""
        return await self._call("POST", collection, json_body=body)

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT an object; with ``metadata.resourceVersion`` set, 409 when it changed meanwhile."""
        return await self._call("PUT", path, json_body=body)

    async def create_secret(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create a Secret; 409 when it exists."""
        return await self.create(f"/api/v1/namespaces/{_q(namespace)}/secrets", body)

    async def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT a Secret; with ``metadata.resourceVersion`` set, 409 when it changed meanwhile."""
        return await self.replace(f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}", body)

    async def patch_secret(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Merge-patch a Secret."""
        path = f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}"
        await self._call("PATCH", path, json_body=patch, content_type="application/merge-patch+json")

    async def delete_secret(self, namespace: str, name: str) -> None:
        """Delete a Secret; a missing one is fine."""
        try:
            await self._call("DELETE", f"/api/v1/namespaces/{_q(namespace)}/secrets/{_q(name)}")
        except KubeError as exc:
            if not exc.not_found:
                raise

    # --- our resources -------------------------------------------------------------------------

    def custom_path(self, plural: str, namespace: str, name: str) -> str:
        """The API path of one of our resources."""
        return f"/apis/{API_VERSION}/namespaces/{_q(namespace)}/{plural}/{_q(name)}"

    async def read_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One of our resources, or None."""
        return await self.read(self.custom_path(plural, namespace, name))

    def collection_path(self, plural: str, namespace: str | None = None) -> str:
        """The API path of all our resources of a kind, in one namespace or all."""
        if namespace:
            return f"/apis/{API_VERSION}/namespaces/{_q(namespace)}/{plural}"
        return f"/apis/{API_VERSION}/{plural}"

    async def list_custom(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """All resources of a kind, in one namespace or all."""
        listing = await self._call("GET", self.collection_path(plural, namespace))
        items: list[dict[str, Any]] = listing.get("items") or []  # null when there are none
        return items

    async def list_versions(self, plural: str, namespace: str | None = None) -> list[tuple[str, str, str]]:
        """(namespace, name, resourceVersion) of every resource of a kind, metadata only."""
        listing = await self._call("GET", self.collection_path(plural, namespace), accept=_METADATA_LIST)
        versions = []
        for item in listing.get("items") or []:  # null when there are none
            meta = item.get("metadata") or {}
            versions.append(
                (
                    str(meta.get("namespace", "")),
                    str(meta.get("name", "")),
                    str(meta.get("resourceVersion", "")),
                )
            )
        return versions

    async def patch_status(
        self, plural: str, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Merge-patch the status subresource."""
        path = self.custom_path(plural, namespace, name) + "/status"
        return await self._call(
            "PATCH", path, json_body={"status": status}, content_type="application/merge-patch+json"
        )

    async def patch_spec(
        self, plural: str, namespace: str, name: str, spec: dict[str, Any], *, resource_version: str
    ) -> None:
        """Merge-patch the spec of one of our resources, only at ``resource_version`` (else 409)."""
        await self._call(
            "PATCH",
            self.custom_path(plural, namespace, name),
            json_body={"metadata": {"resourceVersion": resource_version}, "spec": spec},
            content_type="application/merge-patch+json",
        )

    async def patch_annotations(
        self, plural: str, namespace: str, name: str, annotations: dict[str, str | None]
    ) -> None:
        """Merge-patch annotations of one of our resources (None removes one)."""
        await self._call(
            "PATCH",
            self.custom_path(plural, namespace, name),
            json_body={"metadata": {"annotations": annotations}},
            content_type="application/merge-patch+json",
        )

    async def installations(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Every BundleInstallation visible."""
        return await self.list_custom(INSTALLATION_PLURAL, namespace)

    async def post_event(self, namespace: str, body: dict[str, Any]) -> None:
        """Create an Event (events.k8s.io would do too; core/v1 is what kubectl describe reads)."""
        await self._call("POST", f"/api/v1/namespaces/{_q(namespace)}/events", json_body=body)
