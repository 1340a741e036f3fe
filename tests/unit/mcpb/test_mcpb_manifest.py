"""Manifest rules: versions, required and known fields, server, command, env, platforms, user_config."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Inspect
from .craft import RawEntry, base_manifest, mcp_config, server, write_zip

FILES = {"server/index.js": b"x", "bin/weather": b"\x7fELF", "lib/mod.py": b"", "main.py": b""}


def archive(manifest: dict[str, Any] | bytes, files: dict[str, bytes] | None = None) -> bytes:
    """The manifest plus the usual files as a zip."""
    body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    entries = [RawEntry("manifest.json", body)]
    entries += [RawEntry(name, data) for name, data in (files or FILES).items()]
    return write_zip(entries)


def test_the_summary_shows_what_would_run(inspect_bytes: Inspect) -> None:
    result = inspect_bytes(archive(base_manifest()))
    assert result.verdict == "accepted"
    m = result.manifest
    assert m is not None
    assert (m.name, m.version, m.manifest_version, m.server_type) == ("weather", "1.2.0", "0.3", "node")
    assert (m.entry_point, m.command) == ("server/index.js", "node")
    assert m.args == ["${__dirname}/server/index.js", "--units=${user_config.units}"]
    assert m.env == {"WEATHER_API_KEY": "${user_config.api_key}"}
    assert m.platforms == ["darwin", "linux", "win32"]


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3", "0.4"])
def test_every_supported_manifest_version_is_read(inspect_bytes: Inspect, version: str) -> None:
    manifest = base_manifest(manifest_version=version)
    manifest.pop("display_name")
    assert inspect_bytes(archive(manifest)).verdict == "accepted"


def test_the_older_dxt_version_field_is_read(inspect_bytes: Inspect) -> None:
    result = inspect_bytes(archive(base_manifest(manifest_version=None, dxt_version="0.2")))
    assert result.verdict == "accepted"
    assert result.manifest is not None and result.manifest.manifest_version == "0.2"


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"manifest_version": None}, "neither manifest_version nor dxt_version"),
        ({"manifest_version": "0.5"}, "manifest version 0.5 is not one this reader knows"),
        ({"manifest_version": "1.0"}, "manifest version 1.0 is not one"),
        ({"manifest_version": 0.3}, "is not one this reader knows"),
        ({"dxt_version": "0.2"}, "manifest_version and dxt_version disagree"),
    ],
)
def test_unknown_or_missing_versions_are_refused(
    inspect_bytes: Inspect, changes: dict[str, Any], fragment: str
) -> None:
    result = inspect_bytes(archive(base_manifest(**changes)))
    assert result.code == "manifest_version"
    assert fragment in (result.reason or "")


@pytest.mark.parametrize(
    ("manifest", "code", "reason"),
    [
        (base_manifest(name=None), "manifest_field_missing", "manifest field 'name' is required"),
        (base_manifest(version=None), "manifest_field_missing", "manifest field 'version' is required"),
        (
            base_manifest(description=None),
            "manifest_field_missing",
            "manifest field 'description' is required",
        ),
        (
            base_manifest(author={"email": "a@b.org"}),
            "manifest_field_missing",
            "manifest field 'author.name' is required",
        ),
        (base_manifest(server=None), "manifest_field_missing", "manifest field 'server' is required"),
        (base_manifest(name=""), "manifest_field_type", None),
        (base_manifest(name=7), "manifest_field_type", None),
        (
            base_manifest(homepage="not a url"),
            "manifest_field_type",
            "manifest field 'homepage': must be an absolute URL",
        ),
        (base_manifest(keywords="weather"), "manifest_field_type", None),
        (base_manifest(tools_generated="yes"), "manifest_field_type", None),
        (base_manifest(author={"name": "A", "email": "nope"}), "manifest_field_type", None),
        (base_manifest(icons=[{"src": "i.png", "size": "big"}]), "manifest_field_type", None),
        (base_manifest(compatibility={"platforms": ["freebsd"]}), "manifest_field_type", None),
        (base_manifest(compatibility={"runtimes": {"node": "$(rm -rf /)"}}), "manifest_field_type", None),
        (base_manifest(icon=None, license=None, repository={"type": "git"}), "manifest_field_missing", None),
        (
            base_manifest(
                homepage=None,
                support=None,
                display_name=None,
                long_description=None,
                icon=None,
                keywords=None,
                license=None,
                privacy_policies=None,
                prompts=[{"name": "p"}],
            ),
            "manifest_field_missing",
            "manifest field 'prompts[0].text' is required",
        ),
    ],
)
def test_required_and_typed_fields(
    inspect_bytes: Inspect, manifest: dict[str, Any], code: str, reason: str | None
) -> None:
    result = inspect_bytes(archive(manifest))
    assert (result.verdict, result.code) == ("refused", code)
    if reason is not None:
        assert result.reason == reason


def test_a_null_field_is_refused_by_name(inspect_bytes: Inspect) -> None:
    manifest = base_manifest()
    manifest["license"] = None
    result = inspect_bytes(archive(manifest))
    assert result.code == "manifest_field_type"
    assert "'license' is null" in (result.reason or "")


@pytest.mark.parametrize(
    ("manifest", "where"),
    [
        (base_manifest(telemetry=True), "telemetry"),
        (base_manifest(author={"name": "A", "twitter": "@a"}), "author.twitter"),
        (base_manifest(server=server(mcp_config={"command": "node", "cwd": "/"})), "server.mcp_config.cwd"),
        (
            base_manifest(
                user_config={"k": {"type": "string", "title": "K", "description": "d", "secret": True}}
            ),
            "user_config.k.secret",
        ),
    ],
)
def test_unknown_fields_are_refused(inspect_bytes: Inspect, manifest: dict[str, Any], where: str) -> None:
    result = inspect_bytes(archive(manifest))
    assert result.code == "manifest_field_unknown"
    assert f"manifest field '{where}' is not one this reader knows" in (result.reason or "")


@pytest.mark.parametrize(
    ("version", "field", "value"),
    [
        ("0.1", "privacy_policies", ["https://example.org/privacy"]),
        ("0.2", "icons", [{"src": "icon.png", "size": "16x16"}]),
        ("0.2", "localization", {"resources": "i18n/${locale}.json", "default_locale": "en-US"}),
        ("0.2", "_meta", {"com.example": {"x": 1}}),
    ],
)
def test_fields_from_later_versions_are_unknown_to_earlier_ones(
    inspect_bytes: Inspect, version: str, field: str, value: Any
) -> None:
    manifest = base_manifest(manifest_version=version, display_name=None)
    manifest[field] = value
    result = inspect_bytes(archive(manifest))
    assert result.code == "manifest_field_unknown"
    assert f"'{field}' is not part of manifest version {version}" in (result.reason or "")
    manifest["manifest_version"] = "0.4"
    assert inspect_bytes(archive(manifest)).verdict == "accepted"


def test_every_known_optional_field_is_accepted_when_well_typed(inspect_bytes: Inspect) -> None:
    manifest = base_manifest(
        manifest_version="0.4",
        long_description="Long",
        repository={"type": "git", "url": "https://example.org/weather.git"},
        homepage="https://example.org",
        documentation="https://example.org/docs",
        support="https://example.org/support",
        icon="icon.png",
        icons=[{"src": "icon.png", "size": "16x16", "theme": "dark"}],
        screenshots=["shot.png"],
        localization={"resources": "i18n/${locale}.json", "default_locale": "en-US"},
        tools=[{"name": "forecast", "description": "Get a forecast"}],
        tools_generated=False,
        prompts=[{"name": "p", "description": "d", "arguments": ["city"], "text": "Weather in ${city}"}],
        prompts_generated=False,
        keywords=["weather"],
        license="MIT",
        privacy_policies=["https://example.org/privacy"],
        compatibility={
            "claude_desktop": ">=0.10",
            "platforms": ["linux", "darwin"],
            "runtimes": {"node": ">=18.0.0"},
        },
        _meta={"com.example": {"anything": [1, 2]}},
    )
    manifest["$schema"] = "https://example.org/schema.json"
    assert inspect_bytes(archive(manifest)).verdict == "accepted"


def test_duplicate_json_keys_are_refused(inspect_bytes: Inspect) -> None:
    text = json.dumps(base_manifest())[:-1] + ', "name": "other"}'
    result = inspect_bytes(archive(text.encode()))
    assert (result.code, result.reason) == (
        "manifest_invalid",
        "manifest.json has the key 'name' twice in one object",
    )


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"\xff\xfe{}",
        b"[1, 2]",
        b'{"x": NaN}',
        b"\xef\xbb\xbf" + json.dumps(base_manifest()).encode(),
    ],
)
def test_unreadable_manifests_are_refused(inspect_bytes: Inspect, body: bytes) -> None:
    assert inspect_bytes(archive(body)).code == "manifest_invalid"


_HOSTILE_JSON = {
    "nesting": b'{"manifest_version": "0.3", "_meta": {"x": {"y": '
    + b"[" * 200_000
    + b"]" * 200_000
    + b"}}}",
    "long integer": b'{"manifest_version": "0.3", "x": ' + b"9" * 5000 + b"}",
}


@pytest.mark.parametrize(
    ("kind", "code"), [("nesting", "manifest_too_deep"), ("long integer", "manifest_invalid")]
)
def test_json_that_breaks_the_parser_is_refused_not_raised(
    inspect_bytes: Inspect, kind: str, code: str
) -> None:
    result = inspect_bytes(archive(_HOSTILE_JSON[kind]))
    assert (result.verdict, result.code) == ("refused", code)


def test_nesting_up_to_the_bound_is_read(inspect_bytes: Inspect) -> None:
    deep: Any = "leaf"
    for _ in range(60):  # with the manifest and _meta levels: 62 of the 64 allowed
        deep = {"k": deep}
    manifest = base_manifest(_meta={"com.example": deep})
    assert inspect_bytes(archive(manifest)).verdict == "accepted"


def test_an_unforeseen_failure_is_a_refusal_not_a_traceback(
    inspect_bytes: Inspect, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundle_operator.mcpb import reader

    def broken(data: bytes) -> Any:
        raise KeyError("something nobody foresaw")

    monkeypatch.setattr(reader, "parse_manifest", broken)
    result = inspect_bytes(archive(base_manifest()))
    assert (result.verdict, result.code) == ("refused", "unreadable")
    assert len(result.sha256) == 64


# --- server ------------------------------------------------------------------------------------


def test_a_uv_bundle_is_read_but_not_runnable(inspect_bytes: Inspect) -> None:
    uv = server(type="uv", entry_point="main.py", mcp_config={"command": "uv", "args": ["run", "main.py"]})
    result = inspect_bytes(archive(base_manifest(manifest_version="0.4", server=uv)))
    assert (result.verdict, result.code) == ("not_runnable", "uv_not_runnable")
    assert result.manifest is not None and result.manifest.server_type == "uv"
    assert [f.key for f in result.setup] == ["api_key", "units"]


def test_uv_needs_manifest_version_0_4(inspect_bytes: Inspect) -> None:
    uv = server(type="uv", entry_point="main.py", mcp_config={"command": "uv"})
    assert inspect_bytes(archive(base_manifest(server=uv))).code == "manifest_field_type"


def test_an_unknown_server_type_is_refused(inspect_bytes: Inspect) -> None:
    result = inspect_bytes(archive(base_manifest(server=server(type="docker"))))
    assert result.code == "manifest_field_type"
    assert (result.reason or "").startswith("manifest field 'server.type'")


@pytest.mark.parametrize(
    ("entry_point", "fragment"),
    [
        ("server/missing.js", "is not a file in the archive"),
        ("../outside.js", "escapes the archive"),
        ("/usr/lib/node.js", "absolute path"),
        ("server", "is not a file in the archive"),
    ],
)
def test_the_entry_point_must_be_a_file_inside_the_archive(
    inspect_bytes: Inspect, entry_point: str, fragment: str
) -> None:
    result = inspect_bytes(archive(base_manifest(server=server(entry_point=entry_point))))
    assert result.code == "entry_point"
    assert fragment in (result.reason or "")


def test_an_entry_point_with_a_leading_dot_slash_is_found(inspect_bytes: Inspect) -> None:
    assert (
        inspect_bytes(archive(base_manifest(server=server(entry_point="./server/index.js")))).verdict
        == "accepted"
    )


@pytest.mark.parametrize(
    "command",
    ["node", "python", "python3", "${__dirname}/bin/weather", "${__dirname}${/}bin${pathSeparator}weather"],
)
def test_allowed_commands(inspect_bytes: Inspect, command: str) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(command=command))))
    assert result.verdict == "accepted", result.reason


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("bash", "is not node, python, python3 or a program inside the bundle"),
        ("/usr/bin/node", "is not node"),
        ("npx", "is not node"),
        ("${__dirname}/bin/missing", "is not node"),
        ("${__dirname}/../bin/weather", "is not node"),
        ("${__dirname}", "is not node"),
        ("${HOME}/bin/weather", "is not node"),
        ("${user_config.runtime}", "a person's value never chooses what runs"),
        ("${__dirname}/bin/${user_config.flavor}", "a person's value never chooses what runs"),
    ],
)
def test_refused_commands(inspect_bytes: Inspect, command: str, fragment: str) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(command=command))))
    assert result.code == "command"
    assert fragment in (result.reason or "")


def test_a_platform_override_replaces_the_command_for_that_platform(inspect_bytes: Inspect) -> None:
    cfg = mcp_config(platform_overrides={"win32": {"command": "${__dirname}\\bin\\weather", "env": {}}})
    data = archive(base_manifest(server=cfg))
    linux = inspect_bytes(data, platform="linux")
    win = inspect_bytes(data, platform="win32")
    assert linux.manifest is not None and linux.manifest.command == "node"
    assert win.verdict == "accepted", win.reason
    assert win.manifest is not None and win.manifest.command == "${__dirname}\\bin\\weather"
    assert win.manifest.env == {}
    assert win.manifest.args == linux.manifest.args


def test_a_bad_override_refuses_only_on_its_platform(inspect_bytes: Inspect) -> None:
    data = archive(base_manifest(server=mcp_config(platform_overrides={"darwin": {"command": "sh"}})))
    assert inspect_bytes(data, platform="linux").verdict == "accepted"
    assert inspect_bytes(data, platform="darwin").code == "command"


def test_an_override_for_an_unknown_platform_is_refused(inspect_bytes: Inspect) -> None:
    data = archive(base_manifest(server=mcp_config(platform_overrides={"freebsd": {"command": "node"}})))
    assert inspect_bytes(data).code == "manifest_field_type"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["${user_config.missing}"], "refers to ${user_config.missing}, which user_config does not declare"),
        (["${SECRET_DIR}/x"], "uses the unknown variable ${SECRET_DIR}"),
    ],
)
def test_arguments_may_only_use_known_variables(
    inspect_bytes: Inspect, args: list[str], fragment: str
) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(args=args))))
    assert result.code == "mcp_config"
    assert fragment in (result.reason or "")


def test_arguments_may_use_every_documented_variable(inspect_bytes: Inspect) -> None:
    args = [
        "${__dirname}",
        "${HOME}",
        "${DESKTOP}",
        "${DOCUMENTS}",
        "${DOWNLOADS}",
        "a${/}b${pathSeparator}c",
        "${user_config.api_key}",
    ]
    assert inspect_bytes(archive(base_manifest(server=mcp_config(args=args)))).verdict == "accepted"


@pytest.mark.parametrize(
    "name",
    [
        "PATH",
        "Path",
        "NODE_OPTIONS",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "DYLD_INSERT_LIBRARIES",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "BASH_ENV",
        "UV_INDEX_URL",
        "npm_config_registry",
        "PERL5OPT",
        "HOME",
        "USERPROFILE",
        "APPDATA",
        "LOCALAPPDATA",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "OPENSSL_CONF",
        "OPENSSL_MODULES",
        "OPENSSL_ENGINES",
        "PYTHONPYCACHEPREFIX",
        "PYTHONUSERBASE",
        "NODE_COMPILE_CACHE",
        "NODE_EXTRA_CA_CERTS",
        "NODE_TLS_REJECT_UNAUTHORIZED",
        "SSL_CERT_FILE",
        "GIT_SSH_COMMAND",
    ],
)
def test_environment_that_changes_what_runs_is_refused(inspect_bytes: Inspect, name: str) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(env={name: "/tmp/x"}))))
    assert (result.code, result.reason) == (
        "env",
        f"server.mcp_config.env.{name} changes what runs, so it is refused",
    )


@pytest.mark.parametrize(
    "value",
    [
        "${__dirname}/node_modules",
        "${__dirname}/lib:${__dirname}/vendor",
        "${__dirname}${/}lib${pathSeparator}${__dirname}",
    ],
)
def test_search_paths_inside_the_bundle_are_allowed(inspect_bytes: Inspect, value: str) -> None:
    for name in ("NODE_PATH", "PYTHONPATH"):
        result = inspect_bytes(archive(base_manifest(server=mcp_config(env={name: value}))))
        assert result.verdict == "accepted", result.reason


@pytest.mark.parametrize(
    "value",
    [
        "/usr/lib/node",
        "${__dirname}/lib:/tmp",
        "${__dirname}/../elsewhere",
        "${HOME}/lib",
        "${user_config.units}",
        "",
        "${__dirname}x",
    ],
)
def test_search_paths_outside_the_bundle_are_refused(inspect_bytes: Inspect, value: str) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(env={"PYTHONPATH": value}))))
    assert result.code in ("env", "mcp_config")
    assert "PYTHONPATH" in (result.reason or "")


def test_ordinary_environment_may_carry_user_values(inspect_bytes: Inspect) -> None:
    env = {"API_KEY": "${user_config.api_key}", "LOG_LEVEL": "info", "DATA_DIR": "${DOCUMENTS}/weather"}
    assert inspect_bytes(archive(base_manifest(server=mcp_config(env=env)))).verdict == "accepted"


@pytest.mark.parametrize("name", ["NODE_ENV", "NODE_NO_WARNINGS", "PYTHONUNBUFFERED", "PYTHONIOENCODING"])
def test_runtime_settings_that_do_not_change_what_runs_are_allowed(inspect_bytes: Inspect, name: str) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(env={name: "${user_config.units}"}))))
    assert result.verdict == "accepted", result.reason


def test_an_invalid_environment_name_is_refused(inspect_bytes: Inspect) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(env={"A=B": "x"}))))
    assert result.code == "env"


# --- platforms ---------------------------------------------------------------------------------


def test_platforms_are_checked_against_the_one_asked_for(inspect_bytes: Inspect) -> None:
    data = archive(base_manifest(compatibility={"platforms": ["darwin", "win32"]}))
    refused = inspect_bytes(data, platform="linux")
    assert (refused.code, refused.reason) == ("platform", "the bundle supports darwin, win32, not linux")
    assert refused.manifest is not None and refused.manifest.platforms == ["darwin", "win32"]
    assert inspect_bytes(data, platform="darwin").verdict == "accepted"


def test_the_running_platform_is_the_default(tmp_path: Any) -> None:
    from bundle_operator.mcpb import inspect_file, running_platform

    others = [p for p in ("darwin", "linux", "win32") if p != running_platform()]
    path = tmp_path / "p.mcpb"
    path.write_bytes(archive(base_manifest(compatibility={"platforms": others})))
    assert inspect_file(path).code == "platform"


# --- user_config -------------------------------------------------------------------------------


def test_user_config_becomes_setup_fields(inspect_bytes: Inspect) -> None:
    user_config = {
        "api_key": {
            "type": "string",
            "title": "API key",
            "description": "k",
            "sensitive": True,
            "required": True,
        },
        "days": {"type": "number", "title": "Days", "description": "d", "default": 3, "min": 1, "max": 10},
        "verbose": {"type": "boolean", "title": "Verbose", "description": "v", "default": False},
        "out-dir": {
            "type": "directory",
            "title": "Output",
            "description": "o",
            "default": "${DOCUMENTS}/weather",
        },
        "config": {"type": "file", "title": "Config", "description": "c", "required": False},
    }
    manifest = base_manifest(user_config=user_config, server=mcp_config(args=[], env={}))
    result = inspect_bytes(archive(manifest))
    assert result.verdict == "accepted", result.reason
    got = [(f.key, f.label, f.type, f.required, f.sensitive, f.default) for f in result.setup]
    assert got == [
        ("api_key", "API key", "secret", True, True, None),
        ("days", "Days", "number", False, False, 3),
        ("verbose", "Verbose", "boolean", False, False, False),
        ("out_dir", "Output", "string", False, False, "${DOCUMENTS}/weather"),
        ("config", "Config", "string", False, False, None),
    ]


def test_a_sensitive_default_is_never_kept(inspect_bytes: Inspect) -> None:
    user_config = {
        "token": {"type": "string", "title": "T", "description": "d", "sensitive": True, "default": "abc"}
    }
    result = inspect_bytes(
        archive(base_manifest(user_config=user_config, server=mcp_config(args=[], env={})))
    )
    assert [(f.type, f.default) for f in result.setup] == [("secret", None)]


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        ({"multiple": True}, "asks for multiple values; not supported"),
        ({"type": "number", "default": "three"}, "default must be a number"),
        ({"type": "boolean", "default": 1}, "default must be true or false"),
        ({"default": ["a", "b"]}, "is a list"),
    ],
)
def test_unusable_user_config_is_refused(
    inspect_bytes: Inspect, option: dict[str, Any], fragment: str
) -> None:
    base = {"type": "string", "title": "T", "description": "d"}
    manifest = base_manifest(user_config={"opt": {**base, **option}}, server=mcp_config(args=[], env={}))
    result = inspect_bytes(archive(manifest))
    assert result.code == "user_config"
    assert fragment in (result.reason or "")


def test_user_config_entries_need_title_and_description(inspect_bytes: Inspect) -> None:
    manifest = base_manifest(
        user_config={"opt": {"type": "string", "title": "T"}}, server=mcp_config(args=[], env={})
    )
    result = inspect_bytes(archive(manifest))
    assert (result.code, result.reason) == (
        "manifest_field_missing",
        "manifest field 'user_config.opt.description' is required",
    )


def test_keys_that_collide_after_cleaning_are_refused(inspect_bytes: Inspect) -> None:
    base = {"type": "string", "title": "T", "description": "d"}
    manifest = base_manifest(user_config={"a-b": base, "a_b": base}, server=mcp_config(args=[], env={}))
    assert inspect_bytes(archive(manifest)).code == "user_config"


@pytest.mark.parametrize(
    ("args", "index"),
    [
        (["${user_config.units}"], 0),  # node runs whatever script the person names
        (["-r", "${user_config.units}", "${__dirname}/server/index.js"], 1),
        (["--require=${user_config.units}", "${__dirname}/server/index.js"], 0),
        (["--import", "${user_config.units}/x.mjs", "${__dirname}/server/index.js"], 1),
        (["-e", "${user_config.units}"], 1),
    ],
)
def test_a_person_never_chooses_the_code_a_runtime_runs(
    inspect_bytes: Inspect, args: list[str], index: int
) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(args=args))))
    assert result.code == "args"
    assert result.reason is not None and f"server.mcp_config.args[{index}]" in result.reason


@pytest.mark.parametrize(
    "args",
    [
        ["${__dirname}/server/index.js", "--units", "${user_config.units}"],
        ["-r", "${__dirname}/server/preload.js", "${__dirname}/server/index.js", "${user_config.units}"],
        ["--max-old-space-size=512", "${__dirname}/server/index.js", "--units=${user_config.units}"],
        ["-e", "require('./server/index.js')", "${user_config.units}"],
    ],
)
def test_a_persons_values_may_still_be_the_programs_arguments(
    inspect_bytes: Inspect, args: list[str]
) -> None:
    result = inspect_bytes(archive(base_manifest(server=mcp_config(args=args))))
    assert result.code is None, result.reason
