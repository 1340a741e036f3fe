"""Literal credentials in MCP configuration: analyze refuses what export would have templated.

The places are the ones export screens (seed 000): env and headers by name or value, arguments
(URLs, credential flags, ``NAME=value``, header arguments) and a credentialed ``endpoint_url``.
What the rules in ``credentials`` find there must come from a ``secret`` setup field; issues
name the field and never quote the value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from bundle_operator.document import placeholders
from bundle_operator.document.credentials import (
    PLAIN_SETTING,
    authorization_prefix,
    install_sees_credential,
    is_credentialed_url,
    name_demands_secret,
    screen_args,
)
from bundle_operator.document.issues import Code, Issue, blocking, shown
from bundle_operator.document.models import Bundle, Mcp, UrlMcp
from bundle_operator.document.pointer import join_pointer, split_pointer


@dataclass(frozen=True)
class CredentialSite:
    """A credential found in an MCP: where it stands, how a message names it, and its text (the
    part after a kept prefix such as ``--token=`` or ``Bearer``)."""

    pointer: str
    field: str
    text: str


def credential_sites(mcp: Mcp, base: str) -> Iterator[CredentialSite]:
    """Every place in one MCP's configuration that holds a credential by the screening rules."""
    if isinstance(mcp, UrlMcp):
        if is_credentialed_url(mcp.endpoint_url):
            yield CredentialSite(join_pointer(base, "endpoint_url"), "endpoint_url", mcp.endpoint_url)
        for name, value in mcp.headers.items():
            if install_sees_credential(name, value):
                text = value[len(authorization_prefix(value)) :]
                yield CredentialSite(join_pointer(base, "headers", name), f"header {shown(name)}", text)
        return
    for finding in screen_args(mcp.args, names=name_demands_secret):
        arg = mcp.args[finding.index]
        yield CredentialSite(
            join_pointer(base, "args", finding.index),
            f"argument {finding.index}",
            arg[len(finding.prefix) :],
        )
    for name, value in mcp.env.items():
        if install_sees_credential(name, value):
            text = value[len(authorization_prefix(value)) :]
            yield CredentialSite(join_pointer(base, "env", name), f"env {shown(name)}", text)


def check_credentials(bundle: Bundle) -> list[Issue]:
    """A credential written into an MCP blocks (``credential_literal``); one taken only from setup
    fields that are not ``secret`` blocks too (``credential_not_secret_field``), since it would
    be installed as plain text."""
    secret_fields = {f.key for f in bundle.setup if f.type == "secret"}
    declared = {f.key for f in bundle.setup}
    issues: list[Issue] = []
    for index, mcp in enumerate(bundle.mcps):
        base = join_pointer("/mcps", index)
        entity = f"mcp:{mcp.key}"
        for site in credential_sites(mcp, base):
            if not site.text.strip():
                continue  # nothing written: an empty value leaks nothing
            if PLAIN_SETTING.fullmatch(site.text.strip()):
                # Named like a credential, but a number or a yes/no is a setting (MAX_TOKENS: 4096,
                # --session-timeout 30): blocking the install on it helps nobody. Export still
                # templates such values, which loses nothing.
                continue
            refs = [ref.strip() for ref in placeholders.references(site.text)]
            if any(ref in secret_fields for ref in refs):
                continue  # installed as a secret value
            if not refs:
                issues.append(
                    blocking(
                        Code.CREDENTIAL_LITERAL,
                        f"{site.field} of MCP '{mcp.key}' holds a credential written into the document; "
                        "take it from a ${setup.<key>} reference to a secret setup field",
                        site.pointer,
                        entity,
                    )
                )
            elif all(ref in declared for ref in refs):
                # (an undeclared reference is reported as unknown_setup_reference)
                fields = ", ".join(f"'{shown(ref)}'" for ref in refs)
                issues.append(
                    blocking(
                        Code.CREDENTIAL_NOT_SECRET_FIELD,
                        f"{site.field} of MCP '{mcp.key}' holds a credential, but it refers only to setup "
                        f"field(s) {fields}, which are not of type secret; it would be stored as plain text",
                        site.pointer,
                        entity,
                    )
                )
    return issues


def check_credential_values(bundle: Bundle, values: Mapping[str, str]) -> list[Issue]:
    """With the setup values known: a credential that only shows once they are filled in (a string
    field holding ``postgres://user:password@…`` passed as an argument, say) would be installed as
    plain text, because only ``secret`` fields are stored as secrets. Blocks with
    ``credential_not_secret_field``; the value is never quoted."""
    secret_fields = {f.key for f in bundle.setup if f.type == "secret"}
    issues: list[Issue] = []
    for index, mcp in enumerate(bundle.mcps):
        base = join_pointer("/mcps", index)
        already = {site.pointer for site in credential_sites(mcp, base)}  # check_credentials judged these
        filled = _filled(mcp, values)
        for site in credential_sites(filled, base):
            if site.pointer in already or PLAIN_SETTING.fullmatch(site.text.strip()):
                continue
            refs = [ref.strip() for ref in placeholders.references(_original(mcp, site.pointer, base))]
            if not refs or any(ref in secret_fields for ref in refs):
                continue
            fields = ", ".join(f"'{shown(ref)}'" for ref in refs)
            issues.append(
                blocking(
                    Code.CREDENTIAL_NOT_SECRET_FIELD,
                    f"{site.field} of MCP '{mcp.key}' holds a credential once setup field(s) {fields} "
                    "are filled in, and they are not of type secret; it would be stored as plain text. "
                    "Declare the field type: secret",
                    site.pointer,
                    f"mcp:{mcp.key}",
                )
            )
    return issues


def _fill(text: str, values: Mapping[str, str]) -> str:
    return placeholders.substitute(text, lambda key: values.get(key.strip(), ""))


def _filled(mcp: Mcp, values: Mapping[str, str]) -> Mcp:
    """The MCP as it would run: every ``${setup.x}`` replaced by its value."""
    if isinstance(mcp, UrlMcp):
        return mcp.model_copy(
            update={
                "endpoint_url": _fill(mcp.endpoint_url, values),
                "headers": {k: _fill(v, values) for k, v in mcp.headers.items()},
            }
        )
    return mcp.model_copy(
        update={
            "args": [_fill(a, values) for a in mcp.args],
            "env": {k: _fill(v, values) for k, v in mcp.env.items()},
        }
    )


def _original(mcp: Mcp, pointer: str, base: str) -> str:
    """The text as written in the document at ``pointer`` (one of the places credential_sites names)."""
    rest = split_pointer(pointer[len(base) :])
    if isinstance(mcp, UrlMcp):
        if rest == ["endpoint_url"]:
            return mcp.endpoint_url
        return mcp.headers.get(rest[1], "") if len(rest) == 2 else ""
    if len(rest) == 2 and rest[0] == "args":
        return mcp.args[int(rest[1])]
    return mcp.env.get(rest[1], "") if len(rest) == 2 else ""
