"""Export's credential screening: the rules live in ``bundle_operator.document.credentials``,
shared with analyze; this module keeps the old import path working."""

from __future__ import annotations

from bundle_operator.document.credentials import (
    ArgFinding,
    authorization_prefix,
    is_authorization_value,
    is_credentialed_url,
    name_looks_like_credential,
    screen_args,
    value_is_credential,
)

__all__ = [
    "ArgFinding",
    "authorization_prefix",
    "is_authorization_value",
    "is_credentialed_url",
    "name_looks_like_credential",
    "screen_args",
    "value_is_credential",
]
