"""The JSON contract of ``bundlectl mcpb inspect -o json``: field names and shapes scripts rely on."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from bundle_operator.mcpb.reader import Inspection, ManifestSummary


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    # The reader's summary is already the contract's shape: its fields are the JSON object's.
    manifest: ManifestSummary | None
    signature: SignatureOut | None
    setup: list[SetupOut]

    @classmethod
    def of(cls, inspection: Inspection) -> InspectReport:
        """The report for an inspection."""
        m, s = inspection.manifest, inspection.signature
        # The reader's dataclasses carry these fields under the same names.
        return cls(
            verdict=inspection.verdict,
            code=inspection.code,
            reason=inspection.reason,
            sha256=inspection.sha256,
            manifest=m,
            signature=None if s is None else SignatureOut.model_validate(s, from_attributes=True),
            setup=[SetupOut.model_validate(f, from_attributes=True) for f in inspection.setup],
        )
