"""Reading a document the user names on the command line."""

from __future__ import annotations

import sys
from pathlib import Path

from bundle_operator.document.source import MAX_SOURCE_BYTES


class SourceInputError(Exception):
    """The named file cannot be read."""


def read_source(name: str) -> bytes:
    """The bytes of a file, or of standard input for '-', read no further than the size cap allows."""
    limit = MAX_SOURCE_BYTES + 1  # one byte more, so the parser reports the size instead of a cut
    if name == "-":
        return sys.stdin.buffer.read(limit)
    path = Path(name)
    try:
        with path.open("rb") as handle:
            return handle.read(limit)
    except FileNotFoundError:
        raise SourceInputError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise SourceInputError(f"{name}: is a directory") from None
    except OSError as exc:
        raise SourceInputError(f"{name}: {exc.strerror}") from None
