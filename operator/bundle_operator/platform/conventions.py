"""Rules of the API v1 that both sides hold: how a workspace is named and how large a page is.

The client, the OpenAPI document and the reference platform read them from here, so none of
them can drift from the others.
"""

from __future__ import annotations

import re

# Anchored for the OpenAPI document; always applied with fullmatch, because '$' also matches
# before a final newline.
WORKSPACE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
