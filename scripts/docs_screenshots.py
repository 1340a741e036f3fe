"""Screenshots of the built docs site (`make docs-screenshots`): headless Chromium from Debian's
packages, the site served on loopback, one PNG per page into tmp/screenshots/."""

from __future__ import annotations

import argparse
import functools
import http.server
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from image import ensure_tool

ROOT = Path(__file__).resolve().parents[1]
# The front page and a generated reference page, unless pages are named.
DEFAULT_PAGES = ("", "reference/bundleinstallation/")
# Without these, Chromium keeps trying to reach Google's hosts, which a closed network refuses.
QUIET = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # one line per asset is noise here
        pass


def shoot(site: Path, pages: list[str], out: Path, width: int, height: int) -> list[Path]:
    """Serve `site` on a free loopback port and take one screenshot per page path."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out.mkdir(parents=True, exist_ok=True)
    taken = []
    try:
        for page in pages:
            name = page.strip("/").replace("/", "-") or "index"
            target = out / f"{name}.png"
            with tempfile.TemporaryDirectory() as profile:
                argv = [
                    "chromium", *QUIET, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                    f"--screenshot={target}", f"http://127.0.0.1:{server.server_port}/{page}",
                ]  # fmt: skip
                subprocess.run(argv, check=True, capture_output=True, timeout=120)
            taken.append(target)
    finally:
        server.shutdown()
    return taken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("pages", nargs="*", default=list(DEFAULT_PAGES), help="page paths of the site")
    parser.add_argument("--site", type=Path, default=ROOT / "tmp" / "site", help="the built site")
    parser.add_argument("--out", type=Path, default=ROOT / "tmp" / "screenshots")
    parser.add_argument("--size", default="1280x900", help="window WIDTHxHEIGHT")
    args = parser.parse_args()
    if not (args.site / "index.html").is_file():
        print(f"docs-screenshots: no site in {args.site}: run make docs first", file=sys.stderr)
        return 2
    ensure_tool("chromium", "chromium")
    width, height = (int(part) for part in args.size.split("x"))
    for path in shoot(args.site, args.pages, args.out, width, height):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
