"""The JSON contract of ``bundlectl mcpb inspect -o json``: field names and shapes scripts rely on."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from bundle_operator.mcpb.reader import Inspection


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ManifestOut(_Out):
    name: str
    version: str
    manifest_version: str
    server_type: str
    entry_point: str
    command: str
    args: list[str]
    env: dict[str, str]
    platforms: list[str]


class SignatureOut(_Out):
    status: Literal["unsigned", "signed", "tampered", "invalid"]
    subject: str | None
    fingerprint_sha256: str | None


class SetupOut(_Out):
    key: str
    label: str
    type: str
    required: bool
    sensitive: bool


class InspectReport(_Out):
    """One archive's verdict, exactly as the CLI contract spells it."""

    verdict: Literal["accepted", "not_runnable", "refused"]
    code: str | None
    reason: str | None
    sha256: str
    manifest: ManifestOut | None
    signature: SignatureOut | None
    setup: list[SetupOut]

    @classmethod
    def of(cls, inspection: Inspection) -> InspectReport:
        """The report for an inspection."""
        m, s = inspection.manifest, inspection.signature
        return cls(
            verdict=inspection.verdict,
            code=inspection.code,
            reason=inspection.reason,
            sha256=inspection.sha256,
            manifest=None
            if m is None
            else ManifestOut(
                name=m.name,
                version=m.version,
                manifest_version=m.manifest_version,
                server_type=m.server_type,
                entry_point=m.entry_point,
                command=m.command,
                args=m.args,
                env=m.env,
                platforms=m.platforms,
            ),
            signature=None
            if s is None
            else SignatureOut(status=s.status, subject=s.subject, fingerprint_sha256=s.fingerprint_sha256),
            setup=[
                SetupOut(key=f.key, label=f.label, type=f.type, required=f.required, sensitive=f.sensitive)
                for f in inspection.setup
            ],
        )
