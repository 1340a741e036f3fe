"""The parts of a Bundle's custom resource that say where its document comes from and what it
resolved to, and the base every custom resource model shares (``k8s/resources.py`` builds on it).

Field names are the user-facing API (camelCase in manifests); Python attributes are snake_case.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from bundle_operator.registry.names import (
    LATEST,
    REGISTRY_URL_PATTERN,
    SERVER_NAME_MAX,
    SERVER_NAME_PATTERN,
    VERSION_MAX,
    VERSION_PATTERN,
)


def cel(rule: str, message: str) -> dict[str, Any]:
    """A CRD validation rule, for ``json_schema_extra``."""
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}]}


class ResourceModel(BaseModel):
    """A part of a custom resource: camelCase aliases, frozen, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class LocalObjectKeyRef(ResourceModel):
    """A key of a ConfigMap or Secret in the resource's own namespace."""

    name: str = Field(min_length=1, max_length=253, description="The object's name, in the same namespace.")
    key: str = Field(min_length=1, max_length=253, description="The key inside the object's data.")


class UrlSource(ResourceModel):
    """A bundle document fetched over HTTPS, checked against a SHA-256."""

    url: str = Field(min_length=1, description="Where the document is fetched from (https; 5 MB cap).")
    sha256: str = Field(
        pattern=r"^[0-9a-f]{64}$", description="The SHA-256 of the fetched bytes, 64 lowercase hex digits."
    )


class McpbSource(ResourceModel):
    """A .mcpb archive, read and verified by the archive reader and converted to a bundle."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "[has(self.url), has(self.configMapRef), has(self.secretRef)]"
                    ".filter(x, x).size() == 1",
                    "message": "exactly one archive: url, configMapRef or secretRef",
                },
                {"rule": "!has(self.url) || has(self.sha256)", "message": "mcpb.url requires sha256"},
            ]
        }
    )

    url: str | None = Field(default=None, description="Where the archive is fetched from; needs sha256.")
    sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$", description="The SHA-256 of the archive's bytes."
    )
    config_map_ref: LocalObjectKeyRef | None = Field(
        default=None, description="A ConfigMap whose binaryData key holds the archive."
    )
    secret_ref: LocalObjectKeyRef | None = Field(
        default=None, description="A Secret whose data key holds the archive."
    )
    require_signature: bool = Field(
        default=False, description="Refuse an archive that carries no valid MCPB signature."
    )
    trusted_fingerprints: list[str] = Field(
        default_factory=list,
        description="SHA-256 fingerprints (hex) of signer certificates to accept; empty accepts any signer.",
    )


class RegistrySource(ResourceModel):
    """An MCP Registry record whose .mcpb package is downloaded, checked and converted (DESIGN.md §9.3)."""

    url: str = Field(
        pattern=REGISTRY_URL_PATTERN,
        max_length=2048,
        description="The registry's base URL (https), e.g. https://registry.modelcontextprotocol.io.",
    )
    server: str = Field(
        pattern=SERVER_NAME_PATTERN,
        min_length=3,
        max_length=SERVER_NAME_MAX,
        description="The server's name in the registry, namespace/name (e.g. io.github.owner/name).",
    )
    version: str = Field(
        default=LATEST,
        pattern=VERSION_PATTERN,
        max_length=VERSION_MAX,
        description="The version to install, or latest (read again every refreshInterval).",
    )
    file_sha256: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="The archive's SHA-256 for a record that gives none; must equal the record's if both do.",
    )
    refresh_interval: str = Field(
        default="1h",
        pattern=r"^([0-9]+(s|m|h))+$",
        description="How often the record is read again (a new latest version, a deprecation, a deletion).",
    )


class BundleSource(ResourceModel):
    """Where the bundle document comes from: exactly one of inline, configMapRef, url, mcpb, registry."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            "[has(self.inline), has(self.configMapRef), has(self.url), has(self.mcpb), has(self.registry)]"
            ".filter(x, x).size() == 1",
            "exactly one source: inline, configMapRef, url, mcpb or registry",
        )
    )

    # `make crds` types this field by the document's own models (bundle_operator.document.models).
    inline: dict[str, Any] | None = Field(
        default=None,
        description="The bundle document itself (schema_version 0.1.0 or 0.2.0), field by field.",
    )
    config_map_ref: LocalObjectKeyRef | None = Field(
        default=None, description="A ConfigMap key holding the document as YAML or JSON."
    )
    url: UrlSource | None = Field(default=None, description="A document fetched over HTTPS.")
    mcpb: McpbSource | None = Field(default=None, description="A .mcpb archive converted to a bundle.")
    registry: RegistrySource | None = Field(
        default=None, description="An MCP Registry record whose .mcpb package is converted to a bundle."
    )


class SignatureStatus(ResourceModel):
    """The MCPB signature of an archive source."""

    status: Literal["Signed", "Unsigned"] = Field(description="Signed or Unsigned (refused archives stall).")
    subject: str | None = Field(default=None, description="The signer certificate's subject.")
    fingerprint_sha256: str | None = Field(default=None, description="The signer certificate's SHA-256.")


class SourceStatus(ResourceModel):
    """What a registry source resolved to: the record and the archive that were used."""

    registry: str = Field(description="The registry's base URL.")
    server: str = Field(description="The server's name in the registry.")
    version: str = Field(description="The version used (for latest, the version it resolved to).")
    package_url: str = Field(description="The .mcpb package's URL, without its query string.")
    sha256: str = Field(description="The SHA-256 the downloaded archive was checked against.")
