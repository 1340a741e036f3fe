"""Download a file by https URL without letting the URL reach anything but the public internet.

Every hop (the first URL and each redirect) must be https and resolve only to public addresses;
the connection then goes to the address that was checked (the name is kept for TLS and Host), so
a DNS answer cannot change between the check and the connect. The body streams into a private
temporary file with its SHA-256 computed on the way and a hard byte cap; the checksum is
compared before the caller gets the path (unless the caller passes ``expected_sha256=None``, as
analyze may for a bundle document by URL, seed 000's ``source_url``), and nothing is left behind
on any refusal. Tests and local setups can allow specific non-public networks explicitly
(``allow_networks``).

Used for .mcpb archives (128 MiB cap), bundle documents fetched by URL (5 MB cap) and MCP
Registry records and OAuth issuers' documents (read into memory by ``fetch_answer``, with their
own small caps).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# Never public, whatever the running Python's ipaddress tables say (they change between releases:
# fec0::/10, deprecated site-local, counted as global in some). Embedded IPv4 (mapped, 6to4,
# NAT64) is judged by its IPv4 address instead, so those prefixes are not listed here.
_NEVER_PUBLIC: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "::/96",  # IPv4-compatible, deprecated
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001:db8::/32",
        "3fff::/20",  # documentation
        "5f00::/16",  # SRv6 SIDs
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)
# What an explicit "allow private sources" opens up: loopback and the private ranges (tests and
# local setups). Link-local (cloud metadata at 169.254.169.254) and the rest stay closed.
PRIVATE_NETWORKS = ("127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
_REDIRECTS = (301, 302, 303, 307, 308)
# Refusals that may pass by themselves (the network, a busy server); the rest need a change.
_TRANSIENT_CODES = frozenset({"dns_failed", "timeout", "fetch_failed"})
_RETRYABLE_STATUS = frozenset({408, 425, 429})
_CHUNK = 256 * 1024


class FetchRefused(Exception):
    """The download was refused or failed; ``reason`` names the host, never a query string.

    ``status`` is the HTTP status of an ``http_status`` refusal (the server answered, but not 200).
    """

    def __init__(self, code: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.status = status

    @property
    def transient(self) -> bool:
        """Whether retrying may help: the network, a timeout, a 5xx, 408, 425 or 429.

        Any other status (404, 403) and every guard refusal needs the URL or the server fixed.
        """
        if self.code in _TRANSIENT_CODES:
            return True
        if self.code != "http_status":
            return False
        return self.status is None or self.status >= 500 or self.status in _RETRYABLE_STATUS


T = TypeVar("T")
# Reads one answer once every hop is checked: the response and the URL that answered.
Consumer = Callable[[httpx.Response, httpx.URL], Awaitable[T]]


@dataclass(frozen=True)
class Fetched:
    """A downloaded file whose SHA-256 matched (or was not asked for); the caller deletes ``path``."""

    path: Path
    sha256: str
    size: int
    url: str


def sha256_hex(text: str) -> str | None:
    """A SHA-256 as compared: 64 lowercase hex digits (a ``sha256:`` prefix dropped), or None."""
    digest = text.lower().removeprefix("sha256:")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        return None
    return digest


def tls_context(environ: Mapping[str, str] | None = None) -> ssl.SSLContext:
    """The trust sources are fetched with: the PEM bundle ``SSL_CERT_FILE`` names, else the system store.

    httpx is run with ``trust_env=False`` (no proxies from the environment), so it would trust
    certifi's bundle only; this keeps the OpenSSL convention, where a private registry's CA is
    added by pointing ``SSL_CERT_FILE`` at a bundle that holds it. Raises ``ValueError`` naming
    the variable when the file cannot be read.
    """
    env = os.environ if environ is None else environ
    cafile = env.get("SSL_CERT_FILE") or None
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ValueError(f"SSL_CERT_FILE={cafile}: cannot be read as a PEM CA bundle ({reason})") from None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is a globally routable unicast address (embedded IPv4 judged as IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id is not None:
            return False
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return is_public_address(inner)
    if any(ip in net for net in _NEVER_PUBLIC if net.version == ip.version):
        return False
    return ip.is_global and not (
        ip.is_multicast
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_unspecified
    )


def shown(url: httpx.URL) -> str:
    """A URL as it may appear in a message: scheme, host, port and path, no query or user."""
    port = f":{url.port}" if url.port else ""
    host = f"[{url.host}]" if ":" in url.host else url.host
    return f"{url.scheme}://{host}{port}{url.path}"


def shown_text(url: str) -> str:
    """``shown`` for a URL given as text, which may not even parse."""
    try:
        return shown(httpx.URL(url))
    except httpx.InvalidURL:
        return "(a URL that cannot be read)"


def ascii_host(url: httpx.URL) -> str:
    """The URL's host as it goes on the wire: IDNA (``xn--``) for a name, which Host and SNI need."""
    return url.raw_host.decode("ascii")


def _allowed(ip: IPAddress, allow_networks: Sequence[IPNetwork]) -> bool:
    return is_public_address(ip) or any(ip in net for net in allow_networks if ip.version == net.version)


async def resolve_checked(url: httpx.URL, allow_networks: Sequence[IPNetwork]) -> list[IPAddress]:
    """The addresses to connect to for ``url``; refuses when any address the name has is not allowed."""
    if url.scheme != "https":
        raise FetchRefused("not_https", f"{shown(url)} is not an https address")
    if url.userinfo:
        raise FetchRefused("credentials_in_url", f"{shown(url)} carries credentials in the URL")
    host = ascii_host(url)
    if not host:
        raise FetchRefused("bad_url", "the URL has no host")
    try:
        addresses: list[IPAddress] = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = await anyio.getaddrinfo(host, url.port or 443, type=socket.SOCK_STREAM)
        except OSError:
            raise FetchRefused("dns_failed", f"{host} does not resolve") from None
        # A scoped IPv6 answer ("fe80::1%eth0") is link-local, so the scope only needs dropping.
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise FetchRefused("dns_failed", f"{host} does not resolve")
    # One private answer is enough to refuse: a name that can point inward is not a public name.
    for ip in addresses:
        if not _allowed(ip, allow_networks):
            raise FetchRefused("address_not_public", f"{host} resolves to a non-public address ({ip})")
    return list(dict.fromkeys(addresses))


def _pinned_request(
    client: httpx.AsyncClient, url: httpx.URL, ip: IPAddress, accept: str | None = None
) -> httpx.Request:
    """A GET sent to ``ip`` while TLS and Host still name the URL's host (in its ASCII form)."""
    name = ascii_host(url)
    host = f"[{name}]" if ":" in name else name
    host_header = host if url.port in (None, 443) else f"{host}:{url.port}"
    headers = {"Host": host_header, "Accept-Encoding": "identity"}
    if accept is not None:
        headers["Accept"] = accept
    extensions: dict[str, str] = {}
    try:
        ipaddress.ip_address(name)
    except ValueError:
        extensions["sni_hostname"] = name
    return client.build_request("GET", url.copy_with(host=str(ip)), headers=headers, extensions=extensions)


async def fetch_to_file(
    url: str,
    *,
    expected_sha256: str | None,
    max_bytes: int,
    dest_dir: str | os.PathLike[str] | None = None,
    allow_networks: Sequence[IPNetwork | str] = (),
    verify: ssl.SSLContext | bool = True,
    io_timeout: float = 30.0,
    total_timeout: float = 300.0,
    max_redirects: int = 5,
) -> Fetched:
    """Download ``url`` into a new private file in ``dest_dir`` and check its SHA-256 before returning.

    ``expected_sha256=None`` takes the file unchecked (the SSRF guard and the cap still apply);
    ``Fetched.sha256`` then says what was downloaded.
    """
    expected: str | None = None
    if expected_sha256 is not None:
        expected = sha256_hex(expected_sha256)
        if expected is None:
            raise FetchRefused("bad_checksum", "the expected checksum is not a SHA-256 hex digest")

    async def save(response: httpx.Response, at: httpx.URL) -> Fetched:
        return await _save(response, at, expected, max_bytes, dest_dir)

    return await _guarded(url, save, allow_networks, verify, io_timeout, total_timeout, max_redirects)


@dataclass(frozen=True)
class Answer:
    """A small answer read into memory, with the headers it came with (its caching rules, say)."""

    body: bytes
    headers: httpx.Headers


async def fetch_answer(
    url: str,
    *,
    max_bytes: int,
    accept: str = "application/json",
    allow_networks: Sequence[IPNetwork | str] = (),
    verify: ssl.SSLContext | bool = True,
    io_timeout: float = 10.0,
    total_timeout: float = 30.0,
    max_redirects: int = 5,
) -> Answer:
    """Read a small answer (an API record, an issuer's keys) into memory behind the same guards as a
    download, with the headers it came with."""

    async def read(response: httpx.Response, at: httpx.URL) -> Answer:
        return Answer(await _read_capped(response, at, max_bytes), response.headers)

    return await _guarded(url, read, allow_networks, verify, io_timeout, total_timeout, max_redirects, accept)


async def _guarded(
    url: str,
    consume: Consumer[T],
    allow_networks: Sequence[IPNetwork | str],
    verify: ssl.SSLContext | bool,
    io_timeout: float,
    total_timeout: float,
    max_redirects: int,
    accept: str | None = None,
) -> T:
    networks = [ipaddress.ip_network(n) if isinstance(n, str) else n for n in allow_networks]
    try:
        with anyio.fail_after(total_timeout):
            return await _follow(httpx.URL(url), consume, networks, max_redirects, verify, io_timeout, accept)
    except TimeoutError:
        raise FetchRefused("timeout", f"the download from {shown(httpx.URL(url))} took too long") from None
    except httpx.InvalidURL:
        raise FetchRefused("bad_url", "the URL cannot be read") from None


async def _follow(
    url: httpx.URL,
    consume: Consumer[T],
    networks: Sequence[IPNetwork],
    max_redirects: int,
    verify: ssl.SSLContext | bool,
    io_timeout: float,
    accept: str | None,
) -> T:
    for _hop in range(max_redirects + 1):
        addresses = await resolve_checked(url, networks)
        # A fresh client, so a fresh connection, for every hop: requests go to the checked address,
        # so the pool would key a connection by IP and hand one verified for one host's name to
        # the next host's request on the same address.
        async with httpx.AsyncClient(
            verify=verify, timeout=io_timeout, follow_redirects=False, trust_env=False
        ) as client:
            response = await _connect(client, url, addresses, accept)
            try:
                if response.status_code in _REDIRECTS:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchRefused("bad_redirect", f"{shown(url)} redirects nowhere")
                    url = url.join(location)
                    continue
                if response.status_code != 200:
                    raise FetchRefused(
                        "http_status", f"{shown(url)} answered {response.status_code}", response.status_code
                    )
                return await consume(response, url)
            finally:
                await response.aclose()
    raise FetchRefused("too_many_redirects", f"more than {max_redirects} redirects")


def _certificate_problem(exc: BaseException) -> str | None:
    """The verifier's complaint when a connection failed on the server's certificate, else None."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen.verify_message or "certificate verify failed"
        seen = seen.__cause__ or seen.__context__
    return None


def _private_file(dest_dir: str | os.PathLike[str] | None) -> str:
    fd, name = tempfile.mkstemp(prefix=".fetch-", dir=dest_dir)  # mode 0600
    os.close(fd)
    return name


async def _connect(
    client: httpx.AsyncClient, url: httpx.URL, addresses: list[IPAddress], accept: str | None
) -> httpx.Response:
    """Send the GET to each checked address in turn until one connects."""
    failure = "no address"
    for ip in addresses:
        try:
            return await client.send(_pinned_request(client, url, ip, accept), stream=True)
        except httpx.ConnectError as exc:
            untrusted = _certificate_problem(exc)
            if untrusted is not None:
                # Another address of the same name would present the same certificate.
                raise FetchRefused(
                    "tls_untrusted",
                    f"{shown(url)}: its TLS certificate is not trusted ({untrusted})",
                ) from None
            failure = type(exc).__name__
            continue
        except httpx.HTTPError as exc:
            raise FetchRefused("fetch_failed", f"{shown(url)}: {type(exc).__name__}") from None
    raise FetchRefused("fetch_failed", f"{shown(url)}: {failure}")


def _declared_too_large(response: httpx.Response, url: httpx.URL, max_bytes: int) -> None:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise FetchRefused("too_large", f"{shown(url)} is {declared} bytes; at most {max_bytes}")


async def _read_capped(response: httpx.Response, url: httpx.URL, max_bytes: int) -> bytes:
    """The whole body in memory, refused as soon as it passes ``max_bytes``."""
    _declared_too_large(response, url, max_bytes)
    body = bytearray()
    try:
        async for chunk in response.aiter_raw(_CHUNK):
            body += chunk
            if len(body) > max_bytes:
                raise FetchRefused("too_large", f"{shown(url)} sends more than {max_bytes} bytes")
    except httpx.HTTPError as exc:
        raise FetchRefused("fetch_failed", f"{shown(url)}: {type(exc).__name__}") from None
    return bytes(body)


async def _save(
    response: httpx.Response,
    url: httpx.URL,
    expected: str | None,
    max_bytes: int,
    dest_dir: str | os.PathLike[str] | None,
) -> Fetched:
    _declared_too_large(response, url, max_bytes)
    path = Path(await anyio.to_thread.run_sync(_private_file, dest_dir))
    digest = hashlib.sha256()
    size = 0
    try:
        async with await anyio.open_file(path, "wb") as out:
            try:
                async for chunk in response.aiter_raw(_CHUNK):
                    size += len(chunk)
                    if size > max_bytes:
                        raise FetchRefused("too_large", f"{shown(url)} sends more than {max_bytes} bytes")
                    digest.update(chunk)
                    await out.write(chunk)
            except httpx.HTTPError as exc:
                raise FetchRefused("fetch_failed", f"{shown(url)}: {type(exc).__name__}") from None
        actual = digest.hexdigest()
        if expected is not None and not hmac.compare_digest(actual, expected):
            raise FetchRefused(
                "checksum_mismatch", f"the file from {shown(url)} does not match its expected SHA-256"
            )
    except BaseException:
        # Shielded: on a timeout or cancellation the partial file must still go.
        with anyio.CancelScope(shield=True):
            await anyio.Path(path).unlink(missing_ok=True)
        raise
    return Fetched(path=path, sha256=actual, size=size, url=shown(url))
