"""What each issue code and each condition reason means and what to do about it, written by hand.

The codes come from ``document.issues.Code``; the reasons from the reconcilers in ``k8s/``, the
source resolution in ``sources/`` and the registry reader. A test fails when one of them has no
entry here, so the reference pages and the troubleshooting page stay complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bundle_operator.document.issues import Code

IssueSeverity = Literal["blocking", "warning", "blocking or warning"]


@dataclass(frozen=True)
class IssueRemedy:
    """An issue code's severity, what it means and what to do."""

    severity: IssueSeverity
    means: str
    do: str


def _b(means: str, do: str) -> IssueRemedy:
    return IssueRemedy("blocking", means, do)


def _w(means: str, do: str) -> IssueRemedy:
    return IssueRemedy("warning", means, do)


_SOURCE = "Reported by `bundlectl analyze` of a URL or registry record, as the Bundle's Stalled reason"

ISSUES: dict[Code, IssueRemedy] = {
    # --- the document as text ---
    Code.INVALID_DOCUMENT: _b(
        "The text is not a bundle document: not YAML or JSON, not a mapping at the top level, a "
        "required field missing, or a value of the wrong type.",
        "Fix the field the issue's path names; `bundlectl schema` prints the JSON Schema an editor "
        "can check the document against.",
    ),
    Code.DOCUMENT_TOO_LARGE: _b(
        "The document is larger than 5 MiB, the most the operator reads.",
        "Make the document smaller: move large skills to a GitHub source.",
    ),
    Code.UNKNOWN_FIELD: _b(
        "The document has a field its schema version does not define (often a typo).",
        "Correct or remove the field the path names.",
    ),
    Code.UNSUPPORTED_SCHEMA_VERSION: _b(
        "`schema_version` is not one this operator reads.",
        "Write the document for a supported version (the message lists them).",
    ),
    Code.NEWER_SCHEMA_FIELD: _b(
        "The document uses a field that exists only in a newer schema version than it declares.",
        'Set `schema_version: "0.2.0"`, or remove the field.',
    ),
    # --- names and keys ---
    Code.INVALID_NAME: _b(
        "A name (the bundle's `name`, an entity's display name, an MCP's environment variable or "
        "header name) breaks its pattern.",
        "Rename it as the message says (for the bundle: 1 to 63 letters, digits, `.`, `_` or `-`).",
    ),
    Code.INVALID_VERSION: _b("`version` is not a semantic version.", "Write it as `1.4.0`."),
    Code.INVALID_KEY: _b(
        "An entity's key does not start with a letter or holds other characters than letters, "
        "digits and `_`.",
        "Rename the key.",
    ),
    Code.DUPLICATE_KEY: _b(
        "Two entities (or two setup fields) have the same key; keys are unique within a bundle.",
        "Rename one of them.",
    ),
    Code.UNKNOWN_REFERENCE: _b(
        "A field names an entity (or a gateway member) the bundle does not declare.",
        "Declare it, or correct the name.",
    ),
    # --- setup ---
    Code.UNKNOWN_SETUP_REFERENCE: _b(
        "A `${setup.<key>}` placeholder names no declared setup field.",
        "Declare the setup field, or correct the key.",
    ),
    Code.PLACEHOLDER_NOT_SUBSTITUTED: _w(
        "A `${setup.…}` placeholder is in a field where setup values are not filled in; it installs "
        "as written.",
        "Move the value into a field that takes setup values (MCP env, headers, args, endpoint_url, "
        "context_secret, channel bot_token), or write it out.",
    ),
    Code.MISSING_SETUP: _b(
        "A required setup field has no value and no default.",
        "Give it: `--setup KEY=VALUE` or `--setup-file` for bundlectl, `spec.setup` of the "
        "BundleInstallation (a `secretKeyRef` for secrets).",
    ),
    Code.INVALID_SETUP_VALUE: _b(
        "A setup value does not fit its field (type, pattern, choices; a Telegram bot token's shape).",
        "Give a value that fits; the message says what the field takes.",
    ),
    Code.INVALID_SETUP_DEFAULT: _b(
        "A setup field's default does not fit the field, or a secret field has a default.",
        "Correct the default, or remove it from a secret field.",
    ),
    Code.UNKNOWN_SETUP_KEY: _w(
        "A value was given for a setup key the bundle does not declare; it is ignored.",
        "Remove it, or correct the key.",
    ),
    Code.UNUSED_SETUP_FIELD: _w(
        "A setup field is declared but nothing refers to it.",
        "Refer to it with `${setup.<key>}`, or remove it.",
    ),
    # --- skills ---
    Code.INVALID_SKILL_FRONTMATTER: _b(
        "A skill's SKILL.md front matter cannot be read.",
        "Fix the line the message names.",
    ),
    Code.INVALID_SKILL_SOURCE: _b(
        "A skill's `source_url` is not a GitHub repository URL.",
        "Write `https://github.com/<owner>/<repo>`, optionally with `/tree/<ref>/<folder>`.",
    ),
    # --- credentials ---
    Code.CONTEXT_SECRET_LITERAL: _b(
        "An MCP's `context_secret` is a literal value.",
        "Make it a `${setup.<key>}` reference to a setup field of type secret.",
    ),
    Code.CONTEXT_SECRET_NOT_SECRET_FIELD: _b(
        "An MCP's `context_secret` refers to a setup field that is not of type secret.",
        "Declare that field `type: secret`.",
    ),
    Code.CONTEXT_SECRET_NOT_URL_MCP: _b(
        "`context_secret` is set on an MCP that is not a url MCP.",
        "Remove it; only url MCPs take one.",
    ),
    Code.CONTEXT_SECRET_LENGTH: _b(
        "The value given for a `context_secret` is too short or too long.",
        "Give a value of the length the message names.",
    ),
    Code.CREDENTIAL_LITERAL: _b(
        "A credential (an MCP header or env value, a channel's bot token, a knowledge source's "
        "credential) is written into the document.",
        "Take it from a `${setup.<key>}` reference to a setup field of type secret; credentials "
        "never travel in the document.",
    ),
    Code.CREDENTIAL_NOT_SECRET_FIELD: _b(
        "A credential refers to setup fields that are not of type secret, so it would be stored as "
        "plain text.",
        "Declare those fields `type: secret`.",
    ),
    # --- MCPs and archives ---
    Code.UNSUPPORTED_RUNTIME: _w(
        "A command MCP cannot run on the platform: its command is a local path, not an allowed "
        "runtime, or refers to the plugin root (which exists only inside a plugin). The MCP is "
        "skipped, and what uses it is created without it.",
        "Run the server with an allowed runtime (the message lists them), or package it as an "
        "`.mcpb` archive; otherwise accept that it is left out.",
    ),
    Code.INVALID_ARTIFACT: _b(
        "An MCP's `artifact`, `runtime`, `command` or entry do not fit together (a runtime without "
        "an artifact, a digest that is not `sha256:<64 hex>`, an entry outside the archive).",
        "Correct the fields the path names; `bundlectl mcpb to-bundle` writes them right for an archive.",
    ),
    Code.BINARY_PLATFORM: _b(
        "A binary MCP is built for another OS or architecture than this platform's.",
        "Use the bundle's build for this platform.",
    ),
    Code.RUNS_FROM_ARCHIVE: _w(
        "An MCP runs a command from an `.mcpb` archive, which the install uploads to the platform.",
        "Check that the command is what you expect to run; nothing to do otherwise.",
    ),
    Code.ARTIFACT_UNAVAILABLE: _b(
        "An MCP runs from an archive the platform does not hold, and the install was not given it.",
        "Give the `.mcpb` file (`bundlectl install --artifact FILE`), or install from a Bundle "
        "whose source provides it (mcpb or registry).",
    ),
    Code.INVALID_URL: _b(
        "A URL (an MCP's `endpoint_url` with setup values filled in, a knowledge source's address) "
        "is not usable.",
        "Correct it; the message says why it is refused.",
    ),
    # --- automations ---
    Code.INVALID_SCHEDULE: _b("An automation's schedule is not valid cron.", "Correct the cron expression."),
    Code.INVALID_TIMEZONE: _b(
        "An automation's timezone is not an IANA time zone.", "Write one such as `Europe/Berlin` or `UTC`."
    ),
    # --- analyze and plan ---
    Code.DEPENDENCY_SKIPPED: _w(
        "An entity is created without an MCP (or a gateway without a member) that is skipped.",
        "See the skipped MCP's own issue; the entity works without it.",
    ),
    Code.REQUIREMENT_NOT_CHECKED: _w(
        "An offline analyze cannot check a requirement; only a platform can.",
        "Run `bundlectl plan` against the platform to check it.",
    ),
    Code.REQUIREMENT_NOT_VERIFIED: _w(
        "The platform gives no way to check a requirement (it lists no models); it is assumed present.",
        "Make sure the platform has it.",
    ),
    Code.REQUIREMENT_MISSING: _b(
        "A requirement with policy block is missing on the platform.",
        "Substitute it (`--substitute KIND:REF=VALUE`, `spec.substitutions`) or install where it exists.",
    ),
    Code.REQUIREMENT_STRIPPED: _w(
        "A requirement is missing on the platform and its policy drops what needs it.",
        "Substitute it if you want what needs it; nothing to do otherwise.",
    ),
    Code.SUBSTITUTION_REQUIRED: _b(
        "A requirement with policy substitute has no substitution.",
        "Give one: `--substitute KIND:REF=VALUE` or `spec.substitutions`.",
    ),
    Code.SUBSTITUTION_INVALID: _b(
        "A substitution names something unusable (a model the platform does not offer, a value of "
        "the wrong shape).",
        "Correct the substitution; the message says what is wrong.",
    ),
    Code.SUBSTITUTION_UNUSED: _w(
        "A substitution maps no requirement of the bundle; it has no effect.",
        "Remove it, or correct its `kind:ref`.",
    ),
    Code.UPDATE_CONFLICT: IssueRemedy(
        "blocking or warning",
        "The bundle and an edit on the platform changed the same field. Blocking with onConflict "
        "Fail (the default); a warning naming the side kept with KeepMine or TakeTheirs.",
        "Choose a side: `spec.updatePolicy.onConflict` KeepMine or TakeTheirs (bundlectl "
        "`--on-conflict keep-mine|take-theirs`), or undo one of the edits.",
    ),
    Code.ENTITY_REMOVED: _w(
        "An entity is no longer in the bundle; the install deletes it.",
        "Nothing, unless you meant to keep it: then put it back in the bundle.",
    ),
    Code.ENTITY_KEPT: _w(
        "An entity is no longer wanted but was edited on the platform or is used by something else, "
        "so it is kept and no longer belongs to the installation.",
        "Delete it on the platform if nobody needs it.",
    ),
    Code.NAME_TAKEN: _b(
        "The workspace already has an entity of that name which this installation did not create, "
        "and such names are unique in a workspace.",
        "Give the bundle's entity another name, or rename or delete the other one.",
    ),
    Code.INSTALL_FAILED: _b(
        "`bundlectl install` failed part way; what the run created is rolled back (the message "
        "names anything that could not be deleted).",
        "Read the message for the platform's answer, fix the cause and run the install again.",
    ),
    Code.INSTALL_REFUSED: _b(
        "The platform refused an entity of the install as invalid; what the run created was rolled back.",
        "Correct the fields the message names in the bundle.",
    ),
    # --- gateway ---
    Code.GATEWAY_NAME_CONFLICT: _b(
        "A tool's `override_name` is already presented by another tool of the gateway.",
        "Choose another `override_name`.",
    ),
    Code.GATEWAY_INVALID_NAME: _b(
        "A gateway member, tool, prompt, argument or resource name breaks its pattern.",
        "Rename it as the message says.",
    ),
    Code.GATEWAY_DUPLICATE: _b(
        "A gateway member, curated tool, prompt or resource is declared twice.", "Remove one of them."
    ),
    Code.GATEWAY_LIMIT: _b(
        "The gateway has more members, tools, prompts or resources (or bytes of them) than allowed.",
        "Stay within the limit the message names.",
    ),
    Code.GATEWAY_TOOL_SHADOWED: _w(
        "A member's tool is not served because another tool's `override_name` holds its name.",
        "Rename one of them if the tool should be served.",
    ),
    Code.PROMPT_UNDECLARED_ARGUMENT: _b(
        "A gateway prompt's message uses `{{name}}` for an argument the prompt does not declare.",
        "Declare the argument, or correct the name.",
    ),
    Code.PROMPT_UNKNOWN_RESOURCE: _b(
        "A gateway prompt embeds a resource the gateway does not declare.",
        "Declare the resource, or correct the name.",
    ),
    Code.PROMPT_INVALID_MESSAGE: _b(
        "A gateway prompt has no messages, or a message without exactly one of text or resource.",
        "Correct the prompt's messages.",
    ),
    # --- knowledge and apps ---
    Code.INVALID_SOURCE: _b(
        "A knowledge source is not usable: its key, port or credential names break their rules.",
        "Correct the field the path names.",
    ),
    Code.SOURCE_CRAWLED_AS_WRITTEN: _w(
        "A knowledge source crawls its URL list as written.",
        "After installing, check that these are sites this platform should read.",
    ),
    Code.TENANT_ADDRESS_AS_WRITTEN: _w(
        "A knowledge source holds a tenant address that installs as written on every platform.",
        "Declare a `knowledge_source` requirement with policy substitute so each installer maps it.",
    ),
    Code.INVALID_APP_DOCUMENT: _b("An app's document is larger than allowed.", "Make it smaller."),
    # --- a source refused before any document was read ---
    Code.FETCH_FAILED: _b(
        f"The document or archive could not be downloaded. {_SOURCE} FetchFailed.",
        "Correct the URL (https only, a public address unless private sources are allowed), or "
        "trust its CA (`--ca-file`).",
    ),
    Code.CHECKSUM_MISMATCH: _b(
        f"What was downloaded does not match the SHA-256 given. {_SOURCE} ChecksumMismatch.",
        "Correct the checksum, or the file it points at.",
    ),
    Code.ARCHIVE_REFUSED: _b(
        f"The `.mcpb` archive is refused as unsafe or unreadable. {_SOURCE} ArchiveRefused.",
        "Use an intact archive from its publisher; `bundlectl mcpb inspect` says why it is refused.",
    ),
    Code.SIGNATURE_INVALID: _b(
        f"The archive's signature does not verify. {_SOURCE} SignatureInvalid.",
        "Use an intact archive from its publisher.",
    ),
    Code.INSECURE_PACKAGE_URL: _b(
        f"The registry record's package URL is not https. {_SOURCE} InsecurePackageUrl.",
        "Ask the publisher to serve it over https, or use an mcpb source.",
    ),
    Code.REGISTRY_RECORD_NOT_FOUND: _b(
        f"The registry has no record of that server and version. {_SOURCE} RegistryRecordNotFound.",
        "Correct the server name or version (`bundlectl registry search`).",
    ),
    Code.REGISTRY_RECORD_DELETED: _b(
        f"The registry marks the record deleted. {_SOURCE} RegistryRecordDeleted.",
        "Choose another version.",
    ),
    Code.REGISTRY_RECORD_CHANGED: _b(
        f"The record changed between the two reads around the download. {_SOURCE} RegistryRecordChanged.",
        "Nothing: it is read afresh at the next refresh. If it keeps changing, pin a version.",
    ),
    Code.REGISTRY_RECORD_INVALID: _b(
        f"The registry's answer is not a valid record. {_SOURCE} RegistryRecordInvalid.",
        "Report it to the registry's operator, or choose another version.",
    ),
    Code.REGISTRY_NO_MCPB_PACKAGE: _b(
        f"The record has no `mcpb` package, which is the only kind installed. {_SOURCE} "
        "RegistryNoMcpbPackage.",
        "Choose a server or version that publishes an `.mcpb` package.",
    ),
    Code.REGISTRY_NO_COMPATIBLE_PACKAGE: _b(
        f"None of the record's `mcpb` packages runs on this platform. {_SOURCE} RegistryNoCompatiblePackage.",
        "Choose a version with a package for this platform; the message says why each is refused.",
    ),
    Code.REGISTRY_CHECKSUM_MISSING: _b(
        f"The record's `mcpb` package has no `fileSha256`. {_SOURCE} RegistryChecksumMissing.",
        "Pin the archive's SHA-256 (`fileSha256` in the spec, `--file-sha256` for bundlectl), or "
        "use an mcpb source.",
    ),
    Code.REGISTRY_CHECKSUM_CONFLICT: _b(
        f"The record's `fileSha256` differs from the one pinned. {_SOURCE} RegistryChecksumConflict.",
        "Find out which is right; correct the pin if the record is.",
    ),
    Code.REGISTRY_UNAVAILABLE: _b(
        f"The registry could not be reached or answered with a server error. {_SOURCE} "
        "RegistryUnavailable (a Bundle retries by itself).",
        "Try again later; check the registry URL.",
    ),
    Code.REGISTRY_REFUSED: _b(
        f"The registry refused the request. {_SOURCE} RegistryRefused.",
        "Check the registry URL and that it serves the MCP Registry API v0.1.",
    ),
}


Kind = Literal["Bundle", "BundleInstallation", "Endpoint"]
ALL_KINDS: tuple[Kind, ...] = ("Bundle", "BundleInstallation", "Endpoint")


@dataclass(frozen=True)
class ConditionType:
    """A condition type, the kinds that write it and what its status says."""

    type: str
    kinds: tuple[Kind, ...]
    means: str


CONDITION_TYPES: tuple[ConditionType, ...] = (
    ConditionType(
        "Ready",
        ALL_KINDS,
        "True when the resource is what its spec asks for; False with the reason why not. Ready, "
        "Reconciling and Stalled always carry the same reason.",
    ),
    ConditionType(
        "Reconciling",
        ALL_KINDS,
        "True while work is in flight or a temporary failure is retried; the operator goes on by itself.",
    ),
    ConditionType(
        "Stalled",
        ALL_KINDS,
        "True when nothing changes until someone acts: the reason and message say what to change.",
    ),
    ConditionType(
        "Analyzed",
        ("BundleInstallation",),
        "True (reason Analyzed) when the last analyze found nothing blocking, True with reason "
        "Blocked when it found blocking issues (`status.preview.issues`), False with the Stalled "
        "reason when the inputs could not be read.",
    ),
    ConditionType(
        "Installed",
        ("BundleInstallation",),
        "True (reason Installed) once the bundle's entities are on the platform.",
    ),
    ConditionType(
        "Conflict",
        ("BundleInstallation",),
        "True (reason UpdateConflict) while the bundle and a platform-side edit changed the same "
        "field; False (NoConflict) otherwise. `status.conflicts` lists the fields.",
    ),
    ConditionType(
        "Activated",
        ("BundleInstallation",),
        "True (Activated) when channels and automations run, False (NotActivated) until "
        "`spec.activate` is true.",
    ),
    ConditionType(
        "Drifted",
        ("BundleInstallation",),
        "True (DriftDetected) when the platform differs from what was installed (`status.drift` "
        "lists the paths); False with NoDrift, or DriftCheckDisabled when `spec.driftPolicy.mode` is "
        "Disabled.",
    ),
    ConditionType(
        "Degraded",
        ("Endpoint",),
        "True (MemberUnavailable) while a member server of a served endpoint is down and its tools "
        "fail; False (MembersAvailable) otherwise. `status.members` has each member's health.",
    ),
)


State = Literal["ready", "held", "progressing", "stalled", "not running", "condition"]


@dataclass(frozen=True)
class ReasonRemedy:
    """A condition reason: the condition it is the reason of, the kinds, what it means, what to do."""

    reason: str
    condition: str
    state: State
    kinds: tuple[Kind, ...]
    means: str
    do: str


_MISSING_OBJECT = "Create it, or correct the reference; the resource continues by itself once it exists."
_STALE_SPEC = "Fix the cause and edit the resource (any change of the spec runs it again)."

REASONS: tuple[ReasonRemedy, ...] = (
    # --- Ready=True ---
    ReasonRemedy(
        "Resolved",
        "Ready",
        "ready",
        ("Bundle",),
        "The source was read and the document has no blocking issues.",
        "Nothing.",
    ),
    ReasonRemedy(
        "Installed",
        "Ready",
        "ready",
        ("BundleInstallation",),
        "Every entity is installed and matches the bundle.",
        "Nothing.",
    ),
    ReasonRemedy(
        "InstalledWithDrift",
        "Ready",
        "ready",
        ("BundleInstallation",),
        "Installed, but the platform was edited since (see the Drifted condition).",
        "Undo the edit on the platform, or set `spec.driftPolicy.mode` to Correct to write it back.",
    ),
    ReasonRemedy(
        "DriftCorrected",
        "Ready",
        "ready",
        ("BundleInstallation",),
        "Installed; drift was found and written back (driftPolicy Correct).",
        "Nothing.",
    ),
    ReasonRemedy(
        "Serving",
        "Ready",
        "ready",
        ("Endpoint",),
        "The platform endpoint serves the gateway's tools.",
        "Nothing.",
    ),
    ReasonRemedy(
        "Disabled",
        "Ready",
        "ready",
        ("Endpoint",),
        "The endpoint exists but does not serve (`spec.enabled` is false).",
        "Set `spec.enabled` to true to serve.",
    ),
    # --- held: nothing written on purpose ---
    ReasonRemedy(
        "Paused",
        "Ready",
        "held",
        ("BundleInstallation", "Endpoint"),
        "The `bundle-operator.dev/paused` annotation is set: nothing is written. Ready is True when "
        "nothing would be written anyway, else False.",
        "Remove the annotation to go on.",
    ),
    ReasonRemedy(
        "Suspended",
        "Ready",
        "held",
        ("BundleInstallation",),
        "`spec.suspend` is true: nothing is written. Ready is True when nothing would be written "
        "anyway, else False.",
        "Set `spec.suspend` to false to go on.",
    ),
    ReasonRemedy(
        "AwaitingApproval",
        "Ready",
        "held",
        ("BundleInstallation",),
        "`spec.approval` is Manual and a plan waits for approval (`status.plan`).",
        "Read the plan and approve it: `bundlectl approve`, or set `spec.approvedPlan` to its id.",
    ),
    # --- Reconciling=True ---
    ReasonRemedy(
        "Installing",
        "Reconciling",
        "progressing",
        ("BundleInstallation",),
        "The bundle's entities are being written to the platform.",
        "Nothing; wait.",
    ),
    ReasonRemedy(
        "PlatformUnavailable",
        "Reconciling",
        "progressing",
        ("BundleInstallation", "Endpoint"),
        "A platform call failed in a way the next run may not meet (unreachable, 5xx, 429, an entity "
        "edited or deleted meanwhile); retried with backoff.",
        "If it lasts, check the platform and the operator's connection to it "
        "(`bundle_operator_platform_calls_total` by status).",
    ),
    ReasonRemedy(
        "InstallFailed",
        "Reconciling",
        "progressing",
        ("BundleInstallation",),
        "An install failed part way with a temporary failure and was rolled back; retried. "
        "(Stalled with the same reason when the failure is permanent.)",
        "If it lasts, read the RolledBack event's message.",
    ),
    ReasonRemedy(
        "NoGateway",
        "Reconciling",
        "progressing",
        ("Endpoint",),
        "The referenced BundleInstallation's bundle has no gateway section: nothing to serve.",
        "Add a gateway section to its Bundle; the Endpoint continues by itself.",
    ),
    ReasonRemedy(
        "GatewayNotFound",
        "Reconciling",
        "progressing",
        ("Endpoint",),
        "The gateway bundle the installation reports is not on the platform.",
        "Nothing; the installation installs it again. If it lasts, look at the installation.",
    ),
    ReasonRemedy(
        "InstallationNotFound",
        "Reconciling",
        "progressing",
        ("Endpoint",),
        "`spec.installationRef` names no BundleInstallation in the namespace.",
        _MISSING_OBJECT,
    ),
    ReasonRemedy(
        "InstallationNotInstalled",
        "Reconciling",
        "progressing",
        ("Endpoint",),
        "The referenced BundleInstallation has not installed its bundle (yet), or its spec is invalid.",
        "Look at the installation's conditions.",
    ),
    ReasonRemedy(
        "InstallationDeleting",
        "Reconciling",
        "progressing",
        ("Endpoint",),
        "The referenced BundleInstallation is being deleted, and its gateway with it.",
        "Nothing; the Endpoint waits for a new installation of that name.",
    ),
    ReasonRemedy(
        "SecretOfEarlierEndpoint",
        "Reconciling",
        "progressing",
        ("Endpoint",),
        "The credentials Secret belongs to an earlier Endpoint of the same name and is being garbage "
        "collected.",
        "Nothing; the Endpoint goes on once it is gone.",
    ),
    # --- Stalled=True ---
    ReasonRemedy(
        "InvalidSpec",
        "Stalled",
        "stalled",
        ALL_KINDS,
        "The spec does not validate; the message names the field.",
        "Fix the resource.",
    ),
    ReasonRemedy(
        "InvalidDocument",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The document has blocking issues; `status.issues` lists each with its code and path.",
        "Fix the document (see Issue codes); `bundlectl analyze` shows the same issues locally.",
    ),
    ReasonRemedy(
        "InvalidSource",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The source cannot be used as written: not exactly one kind of source, an mcpb url without "
        "its sha256, a sha256 that is not 64 hex digits, a value that is not valid base64, a bad "
        "registry URL.",
        "Correct `spec.source`.",
    ),
    ReasonRemedy(
        "FetchFailed",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The document or archive could not be downloaded: refused (not https, a private address, "
        "too large, an untrusted certificate) or failed. Reconciling with the same reason when the "
        "failure is temporary.",
        "Follow the hint in the message (for a private CA: `SSL_CERT_FILE` in the operator's environment).",
    ),
    ReasonRemedy(
        "ChecksumMismatch",
        "Stalled",
        "stalled",
        ("Bundle",),
        "What was downloaded does not match the pinned SHA-256.",
        "Correct the checksum or the file.",
    ),
    ReasonRemedy(
        "ArchiveRefused",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The `.mcpb` archive is refused as unsafe, unreadable or too large.",
        "Use an intact archive; `bundlectl mcpb inspect` says why it is refused.",
    ),
    ReasonRemedy(
        "SignatureInvalid",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The archive's signature does not verify.",
        "Use an intact archive from its publisher.",
    ),
    ReasonRemedy(
        "SignatureRequired",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The signature policy requires a signed archive and this one is not signed.",
        "Use a signed archive, or drop the requirement.",
    ),
    ReasonRemedy(
        "SignerNotTrusted",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The archive is signed by a certificate whose fingerprint is not in `trustedFingerprints`.",
        "Add that fingerprint (the message gives it) if you trust the signer.",
    ),
    ReasonRemedy(
        "InsecurePackageUrl",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The registry record's package URL is not https.",
        "Use another version or an mcpb source.",
    ),
    ReasonRemedy(
        "RegistryRecordNotFound",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The registry has no record of that server and version.",
        "Correct the server or version (`bundlectl registry search`).",
    ),
    ReasonRemedy(
        "RegistryRecordDeleted",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The registry marks the record deleted.",
        "Choose another version.",
    ),
    ReasonRemedy(
        "RegistryRecordChanged",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The record changed between its two reads around the download; nothing was downloaded.",
        "Nothing; it is read afresh at the next refresh.",
    ),
    ReasonRemedy(
        "RegistryRecordInvalid",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The registry's answer is not a valid record.",
        "Choose another version, or tell the registry's operator.",
    ),
    ReasonRemedy(
        "RegistryNoMcpbPackage",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The record has no `mcpb` package.",
        "Choose a server or version that publishes one.",
    ),
    ReasonRemedy(
        "RegistryNoCompatiblePackage",
        "Stalled",
        "stalled",
        ("Bundle",),
        "None of the record's `mcpb` packages runs on this platform.",
        "Choose a version with a package for this platform.",
    ),
    ReasonRemedy(
        "RegistryChecksumMissing",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The record's package has no `fileSha256`.",
        "Pin the archive's SHA-256 in `fileSha256`, or use an mcpb source.",
    ),
    ReasonRemedy(
        "RegistryChecksumConflict",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The record's `fileSha256` differs from the one the spec pins; nothing is downloaded.",
        "Find out which is right; correct the pin if the record is.",
    ),
    ReasonRemedy(
        "RegistryUnavailable",
        "Reconciling",
        "progressing",
        ("Bundle",),
        "The registry could not be reached or failed; retried.",
        "If it lasts, check the registry URL.",
    ),
    ReasonRemedy(
        "RegistryRefused",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The registry refused the request.",
        "Check the registry URL.",
    ),
    ReasonRemedy(
        "SecretNotFound",
        "Stalled",
        "stalled",
        ALL_KINDS,
        "A Secret the spec refers to (a source, a setup value, a platform token) does not exist.",
        _MISSING_OBJECT,
    ),
    ReasonRemedy(
        "SecretKeyNotFound",
        "Stalled",
        "stalled",
        ALL_KINDS,
        "A Secret the spec refers to has no such key.",
        "Add the key, or correct the reference.",
    ),
    ReasonRemedy(
        "ConfigMapNotFound",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The ConfigMap the source names does not exist.",
        _MISSING_OBJECT,
    ),
    ReasonRemedy(
        "ConfigMapKeyNotFound",
        "Stalled",
        "stalled",
        ("Bundle",),
        "The ConfigMap the source names has no such key.",
        "Add the key, or correct the reference.",
    ),
    ReasonRemedy(
        "BundleNotFound",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "`spec.bundleRef` names no Bundle in the namespace.",
        _MISSING_OBJECT,
    ),
    ReasonRemedy(
        "BundleNotReady",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "The Bundle's source cannot be resolved (its spec is invalid or its source is refused).",
        "Look at the Bundle's Stalled reason and fix that.",
    ),
    ReasonRemedy(
        "BundleInvalid",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "The Bundle's document has blocking issues.",
        "Fix the document (see the Bundle's `status.issues`).",
    ),
    ReasonRemedy(
        "DuplicateInstallation",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "Another BundleInstallation already installs the same bundle into the same workspace of "
        "the platform (the first one keeps it).",
        "Delete one of the two.",
    ),
    ReasonRemedy(
        "NoPlatform",
        "Stalled",
        "stalled",
        ("BundleInstallation", "Endpoint"),
        "The spec names no platform and the operator has no default platform URL.",
        "Set `spec.platform.url`, or give the operator a default (`--platform-url`, the chart's values).",
    ),
    ReasonRemedy(
        "InvalidSetup",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "A `spec.setup` item gives neither or both of `value` and `secretKeyRef`.",
        "Give exactly one.",
    ),
    ReasonRemedy(
        "SecretValueInSpec",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "A secret setup field is given as a plain `value`.",
        "Put it in a Secret and refer to it with `secretKeyRef`.",
    ),
    ReasonRemedy(
        "InvalidSecretValue",
        "Stalled",
        "stalled",
        ("BundleInstallation", "Endpoint"),
        "A Secret key the spec refers to does not hold UTF-8 text.",
        "Store the value as text.",
    ),
    ReasonRemedy(
        "StateUnreadable",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "The Secret that keeps what the installation wrote (`<name>-bundle-state`) cannot be used: "
        "it belongs to something else, holds no record, or records another workspace than "
        "`spec.workspace`.",
        "Follow the message: rename or delete a Secret of that name that is not the installation's; "
        "for another workspace, set `spec.workspace` back.",
    ),
    ReasonRemedy(
        "RecordTooLarge",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "What the bundle writes would not fit in the installation's state Secret (700 KiB "
        "compressed); nothing was written.",
        "Split the bundle, or move large skills to a GitHub source.",
    ),
    ReasonRemedy(
        "Blocked",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "Analyze against the platform found blocking issues; nothing was written. "
        "`status.preview.issues` lists them.",
        "Fix what the issues say (see Issue codes); `bundlectl plan` shows the same.",
    ),
    ReasonRemedy(
        "Conflict",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "The bundle and a platform-side edit changed the same field, and onConflict is Fail; "
        "nothing was written. `status.conflicts` lists the fields.",
        "Set `spec.updatePolicy.onConflict` to KeepMine or TakeTheirs, or undo one of the edits.",
    ),
    ReasonRemedy(
        "InstallFailed",
        "Stalled",
        "stalled",
        ("BundleInstallation",),
        "An install failed part way with a permanent failure (the platform refused an entity) and "
        "was rolled back.",
        _STALE_SPEC,
    ),
    ReasonRemedy(
        "PlatformRefused",
        "Stalled",
        "stalled",
        ("BundleInstallation", "Endpoint"),
        "The platform refused a call in a way retrying does not change (401, 403, a 409 such as an "
        "entity in use).",
        "Check the token and the workspace, then edit the resource (or annotate it with "
        "`bundle-operator.dev/reconcile-requested-at`).",
    ),
    ReasonRemedy(
        "InvalidName",
        "Stalled",
        "stalled",
        ("Endpoint",),
        "The Endpoint's name cannot name a platform endpoint (at most 64 letters, digits, `-` or `_`).",
        "Create the Endpoint under another name.",
    ),
    ReasonRemedy(
        "NameTaken",
        "Stalled",
        "stalled",
        ("Endpoint",),
        "The platform already has an endpoint of that name; endpoint names are unique across the platform.",
        "Give the Endpoint another name, or delete the other endpoint.",
    ),
    ReasonRemedy(
        "AuthModeMismatch",
        "Stalled",
        "stalled",
        ("Endpoint",),
        "The platform endpoint of that name uses another auth mode than `spec.auth.mode`; the mode "
        "cannot change.",
        "Delete it on the platform, or use its auth mode.",
    ),
    ReasonRemedy(
        "SecretNotOwned",
        "Stalled",
        "stalled",
        ("Endpoint",),
        "`spec.credentialsSecretName` names a Secret the Endpoint does not own; it is never overwritten.",
        "Name another Secret, or delete that one.",
    ),
    # --- Ready=False, not stalled or stalled: installed but not running ---
    ReasonRemedy(
        "McpNotRunning",
        "Ready",
        "not running",
        ("BundleInstallation",),
        "Installed, but the platform cannot run some MCP servers; the message names them. Stalled "
        "too when only a person can change that (an unpacked tree that changed), not while the "
        "platform restarts a crashed server.",
        "Look at the MCP instances' health on the platform.",
    ),
    # --- the domain conditions' own reasons ---
    ReasonRemedy(
        "Analyzed",
        "Analyzed",
        "condition",
        ("BundleInstallation",),
        "Analyze found nothing blocking.",
        "Nothing.",
    ),
    ReasonRemedy(
        "Blocked",
        "Analyzed",
        "condition",
        ("BundleInstallation",),
        "Analyze found blocking issues (Stalled says Blocked or Conflict).",
        "See the Stalled reason.",
    ),
    ReasonRemedy(
        "Installed",
        "Installed",
        "condition",
        ("BundleInstallation",),
        "The entities are on the platform.",
        "Nothing.",
    ),
    ReasonRemedy(
        "UpdateConflict",
        "Conflict",
        "condition",
        ("BundleInstallation",),
        "The bundle and a platform-side edit changed the same field.",
        "See the Stalled reason Conflict.",
    ),
    ReasonRemedy(
        "NoConflict", "Conflict", "condition", ("BundleInstallation",), "No field conflicts.", "Nothing."
    ),
    ReasonRemedy(
        "Activated",
        "Activated",
        "condition",
        ("BundleInstallation",),
        "Channels and automations run.",
        "Nothing.",
    ),
    ReasonRemedy(
        "NotActivated",
        "Activated",
        "condition",
        ("BundleInstallation",),
        "Channels and automations are installed but do not run.",
        "Set `spec.activate` to true to run them.",
    ),
    ReasonRemedy(
        "DriftDetected",
        "Drifted",
        "condition",
        ("BundleInstallation",),
        "The platform differs from what was installed; `status.drift` lists the paths.",
        "Undo the edit, or set `spec.driftPolicy.mode` to Correct to write it back.",
    ),
    ReasonRemedy(
        "NoDrift",
        "Drifted",
        "condition",
        ("BundleInstallation",),
        "The platform matches what was installed.",
        "Nothing.",
    ),
    ReasonRemedy(
        "DriftCheckDisabled",
        "Drifted",
        "condition",
        ("BundleInstallation",),
        "`spec.driftPolicy.mode` is Disabled: drift is not checked.",
        "Nothing, unless you want drift checked.",
    ),
    ReasonRemedy(
        "MemberUnavailable",
        "Degraded",
        "condition",
        ("Endpoint",),
        "A member server of the endpoint is down; its tools fail until it is back.",
        "Look at `status.members` and at the member server.",
    ),
    ReasonRemedy(
        "MembersAvailable", "Degraded", "condition", ("Endpoint",), "Every member is up.", "Nothing."
    ),
)
