"""Rules of schema 0.2.0's knowledge sets and apps that the models alone cannot state."""

from __future__ import annotations

from bundle_operator.document import placeholders
from bundle_operator.document.credentials import is_credentialed_url
from bundle_operator.document.issues import Code, Issue, blocking, blocking_for, shown, warning
from bundle_operator.document.knowledge import (
    MAX_APP_DOCUMENT,
    MAX_SOURCE_LIST,
    SOURCE_FIELDS,
    app_document_size,
    credential_name_problem,
    requirement_ref,
    source_key_problem,
    tenant_address,
)
from bundle_operator.document.models import SCHEMA_VERSION, Bundle
from bundle_operator.document.pointer import join_pointer
from bundle_operator.document.schedule import cron_issues
from bundle_operator.document.urls import url_problem

MAX_SOURCES = 100


def check_schema_fields(bundle: Bundle) -> list[Issue]:
    """A 0.1.0 document that uses a section 0.2.0 added is refused, naming the section."""
    if bundle.schema_version != SCHEMA_VERSION:
        return []
    used: list[str] = [f"/{name}" for name in ("knowledge_sets", "apps") if name in bundle.model_fields_set]
    used += [
        join_pointer("/agents", index, "knowledge_sets")
        for index, agent in enumerate(bundle.agents)
        if "knowledge_sets" in agent.model_fields_set
    ]
    return [
        blocking(
            Code.NEWER_SCHEMA_FIELD,
            f'{pointer} needs schema_version "0.2.0"; this document says "{SCHEMA_VERSION}"',
            pointer,
        )
        for pointer in used
    ]


def check_knowledge_sets(bundle: Bundle) -> list[Issue]:
    """Source keys and fields, schedules, credential references, and what travels as written."""
    issues: list[Issue] = []
    secret_fields = {f.key for f in bundle.setup if f.type == "secret"}
    declared = {f.key for f in bundle.setup}
    substituted = {r.ref for r in bundle.requires if r.kind == "knowledge_source"}
    for index, knowledge_set in enumerate(bundle.knowledge_sets):
        entity = f"knowledge_set:{knowledge_set.key}"
        base = join_pointer("/knowledge_sets", index)
        if len(knowledge_set.sources) > MAX_SOURCES:
            issues.append(
                blocking(
                    Code.INVALID_SOURCE,
                    f"knowledge set '{knowledge_set.key}' has more than {MAX_SOURCES} sources",
                    join_pointer(base, "sources"),
                    entity,
                )
            )
        for key, source in knowledge_set.sources.items():
            at = join_pointer(base, "sources", key)
            issues += blocking_for(
                source_key_problem(key), Code.INVALID_SOURCE, f"source key '{shown(key)}'", at, entity
            )
            data = source.model_dump(exclude_none=True)
            issues += _field_issues(source.type, data, at, entity)
            issues += _url_issues(key, data, at, entity)
            if source.sync_schedule is not None:
                subject, where = f"sync_schedule of source '{shown(key)}'", join_pointer(at, "sync_schedule")
                issues += cron_issues(source.sync_schedule, subject, where, entity)
            for name, text in source.credentials.items():
                pointer = join_pointer(at, "credentials", name)
                issues += _credential_issues(name, text, pointer, entity, secret_fields, declared)
            if source.type == "website":
                issues.append(
                    warning(
                        Code.SOURCE_CRAWLED_AS_WRITTEN,
                        f"source '{shown(key)}' of knowledge set '{knowledge_set.key}' crawls its URL list "
                        "as written; check after installing that these are sites this instance should read",
                        join_pointer(at, "urls"),
                        entity,
                    )
                )
            address = tenant_address(data)
            if address is not None and requirement_ref(source.type, address[1]) not in substituted:
                issues.append(
                    warning(
                        Code.TENANT_ADDRESS_AS_WRITTEN,
                        f"{address[0]} of source '{shown(key)}' is a tenant address that installs as "
                        f"written; declare requires kind knowledge_source ref '{source.type}:…' with "
                        "policy substitute to have each installer map it",
                        join_pointer(at, address[0]),
                        entity,
                    )
                )
    return issues


def _field_issues(source_type: str, data: dict[str, object], at: str, entity: str) -> list[Issue]:
    fields = SOURCE_FIELDS[source_type]
    issues: list[Issue] = []
    for name in fields.required:
        value = data.get(name)
        if value == "" or value == []:
            issues.append(
                blocking(
                    Code.INVALID_SOURCE,
                    f"{name} of a {source_type} source must not be empty",
                    join_pointer(at, name),
                    entity,
                )
            )
    for name in fields.lists:
        value = data.get(name)
        if isinstance(value, list) and len(value) > MAX_SOURCE_LIST:
            issues.append(
                blocking(
                    Code.INVALID_SOURCE,
                    f"{name} of a {source_type} source holds more than {MAX_SOURCE_LIST} entries",
                    join_pointer(at, name),
                    entity,
                )
            )
    port = data.get("port")
    if isinstance(port, int) and not 1 <= port <= 65535:
        issues.append(
            blocking(
                Code.INVALID_SOURCE, "port must be between 1 and 65535", join_pointer(at, "port"), entity
            )
        )
    return issues


def _url_issues(key: str, data: dict[str, object], at: str, entity: str) -> list[Issue]:
    """A website's URLs and a WebDAV or Nextcloud base URL must be http(s) URLs without a credential
    in them (a credential goes under ``credentials``, from a secret setup field)."""
    places: list[tuple[str, object]] = []
    if isinstance(data.get("base_url"), str):
        places.append((join_pointer(at, "base_url"), data["base_url"]))
    urls = data.get("urls")
    if isinstance(urls, list):
        places += [(join_pointer(at, "urls", index), url) for index, url in enumerate(urls)]
    issues: list[Issue] = []
    for pointer, url in places:
        if not isinstance(url, str) or url == "":
            continue  # an empty one is named by the field checks
        problem = url_problem(url)
        if problem is not None:
            issues.append(
                blocking(
                    Code.INVALID_URL,
                    f"{pointer} of source '{shown(key)}' is not usable: {problem}",
                    pointer,
                    entity,
                )
            )
        elif is_credentialed_url(url):
            issues.append(
                blocking(
                    Code.CREDENTIAL_LITERAL,
                    f"{pointer} of source '{shown(key)}' carries a credential; give it under credentials "
                    "as a ${setup.<key>} reference to a secret setup field",
                    pointer,
                    entity,
                )
            )
    return issues


def _credential_issues(
    name: str, text: str, pointer: str, entity: str, secret_fields: set[str], declared: set[str]
) -> list[Issue]:
    problem = credential_name_problem(name)
    if problem is not None:
        return [blocking(Code.INVALID_SOURCE, f"credential name '{shown(name)}' {problem}", pointer, entity)]
    key = placeholders.whole_reference(text)
    if key is None:
        # Never quote the value: it may be the credential itself.
        return [
            blocking(
                Code.CREDENTIAL_LITERAL,
                f"credential '{shown(name)}' must be a ${{setup.<key>}} reference to a secret setup field, "
                "not a value",
                pointer,
                entity,
            )
        ]
    if key in declared and key not in secret_fields:  # an undeclared key is reported as such
        return [
            blocking(
                Code.CREDENTIAL_NOT_SECRET_FIELD,
                f"credential '{shown(name)}' refers to setup field '{shown(key)}', which is not of "
                "type secret",
                pointer,
                entity,
            )
        ]
    return []


def check_apps(bundle: Bundle) -> list[Issue]:
    """An app's document must fit the platform's limit."""
    issues: list[Issue] = []
    for index, app in enumerate(bundle.apps):
        size = app_document_size(app.document)
        if size > MAX_APP_DOCUMENT:
            issues.append(
                blocking(
                    Code.INVALID_APP_DOCUMENT,
                    f"document of app '{app.key}' is {size} bytes; an app document holds at most "
                    f"{MAX_APP_DOCUMENT} bytes",
                    join_pointer("/apps", index, "document"),
                    f"app:{app.key}",
                )
            )
    return issues
