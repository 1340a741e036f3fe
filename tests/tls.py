"""HTTPS on loopback for tests (the fetcher refuses plain http): a throwaway certificate authority
with a server certificate for 127.0.0.1, and a threaded server that serves a handler with it."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bundle_operator.devcluster.pki import loopback_serving


@dataclass(frozen=True)
class TlsFiles:
    """The server's certificate and key files, and the CA that issued it (PEM text and file)."""

    cert: Path
    key: Path
    ca_pem: str
    ca_file: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context that trusts only this CA."""
        return ssl.create_default_context(cadata=self.ca_pem)


def throwaway_tls(tmp: Path, ca_name: str = "test CA") -> TlsFiles:
    """Write a CA and a certificate for localhost and 127.0.0.1 it issued into ``tmp``."""
    ca, server = loopback_serving(ca_name)
    (tmp / "server.pem").write_bytes(server.cert_pem)
    (tmp / "server-key.pem").write_bytes(server.key_pem)
    (tmp / "ca.pem").write_bytes(ca.cert_pem)
    return TlsFiles(tmp / "server.pem", tmp / "server-key.pem", ca.cert_pem.decode(), tmp / "ca.pem")


class QuietHandler(BaseHTTPRequestHandler):
    """A keep-alive request handler that logs nothing and answers with one call."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def answer(self, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None) -> None:
        """Send a whole response: status, headers, Content-Length and body."""
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            # The client hung up mid-answer (a size limit refusing it): what the test wants.
            self.close_connection = True


@contextmanager
def https_server(handler: type[BaseHTTPRequestHandler], tls: TlsFiles) -> Iterator[int]:
    """Serve ``handler`` over HTTPS on 127.0.0.1 in a thread; yields the port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls.cert, tls.key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
