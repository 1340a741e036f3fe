"""`python -m bundle_operator.docgen [DOCS_DIR]`: write the generated reference pages."""

from __future__ import annotations

import sys
from pathlib import Path

from bundle_operator.docgen import all_pages


def main(argv: list[str]) -> int:
    docs = Path(argv[0]) if argv else Path("docs")
    for path, text in sorted(all_pages().items()):
        target = docs / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
