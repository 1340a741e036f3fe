"""The container image's recipe, checked the way a reviewer would: Dockerfile, .dockerignore and the lock.

No container engine runs here, so these read the files: every base pinned by digest, a non-root
numeric user, the lock installed with --require-hashes, nothing but the venv in the final stage, no
secret in the recipe or the build context, an entrypoint and default command the real CLI accepts,
and a lock that pins and hashes every runtime dependency of pyproject.toml.
tests/integration/test_image_lock.py builds a venv from the lock and runs the entrypoints.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from bundle_operator import cli
from bundle_operator.k8s.process import options as run_options
from bundle_operator.platform.client import ENV_TOKEN, ENV_URL

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
LOCK = ROOT / "requirements.lock"
PYPROJECT = ROOT / "pyproject.toml"
DOCS = ROOT / "docs" / "how-to" / "image.md"
IMAGE_MK = ROOT / "mk" / "image.mk"

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|KEY|CREDENTIAL|PRIVATE", re.IGNORECASE)
SECRET_FILE = re.compile(
    r"(^|/)(\.env(\..*)?|kubeconfig|[^/]*\.kubeconfig|\.kube|[^/]*\.pem|[^/]*\.key|id_[a-z0-9]+|"
    r"\.netrc|\.npmrc|\.pypirc|\.git-credentials|\.docker)(/|$)"
)
BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|cc|clang|make|build-essential|cmake|rustc|cargo|apt-get|apt|apk|dnf|yum|"
    r"dpkg|pip|pip3|easy_install|uv|curl|wget)\b"
)


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int

    def flags(self) -> dict[str, str]:
        """The leading --name=value flags (COPY --from=..., --chown=..., FROM --platform=...)."""
        found: dict[str, str] = {}
        for word in shlex.split(self.args):
            if not word.startswith("--"):
                break
            name, _, value = word[2:].partition("=")
            found[name] = value
        return found

    def operands(self) -> list[str]:
        """The words after the leading flags; the JSON array form when there is one."""
        if self.args.startswith("["):
            value: list[str] = json.loads(self.args)
            return value
        return [word for word in shlex.split(self.args) if not word.startswith("--")]


@dataclass
class Stage:
    base: str
    name: str | None
    index: int
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse_instructions(text: str) -> list[Instruction]:
    """A Dockerfile's instructions, continuation lines joined and comments dropped."""
    instructions: list[Instruction] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # comments and blank lines, also inside a continued instruction
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        keyword, _, args = " ".join(p for p in parts if p).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        parts = []
    assert not parts, "the Dockerfile ends inside a continued instruction"
    return instructions


def parse_stages(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for instruction in parse_instructions(text):
        if instruction.keyword == "FROM":
            words = instruction.operands()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            assert len(words) in (1, 3), f"line {instruction.line}: FROM {instruction.args!r}"
            stages.append(Stage(words[0], name, len(stages)))
        else:
            assert stages or instruction.keyword == "ARG", f"line {instruction.line}: before any FROM"
            if stages:
                stages[-1].instructions.append(instruction)
    return stages


def env_of(instruction: Instruction) -> dict[str, str]:
    """ENV's or ARG's name=value pairs (ARG NAME alone gives an empty value)."""
    words = shlex.split(instruction.args)
    if instruction.keyword == "ENV" and len(words) >= 2 and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}  # the legacy `ENV NAME value` form
    pairs: dict[str, str] = {}
    for word in words:
        name, _, value = word.partition("=")
        pairs[name] = value
    return pairs


def commands_of(instruction: Instruction) -> list[str]:
    """A RUN's shell commands, split at && ; and ||."""
    return [c.strip() for c in re.split(r"&&|\|\||;", instruction.args) if c.strip()]


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_stages(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def ancestry(stages: list[Stage], stage: Stage) -> list[Stage]:
    """The stage and every stage it is built FROM, nearest first."""
    by_name = {s.name: s for s in stages if s.name}
    chain = [stage]
    while chain[-1].base in by_name:
        chain.append(by_name[chain[-1].base])
    return chain


def stage_named(stages: list[Stage], name: str) -> Stage:
    matches = [s for s in stages if s.name == name]
    assert len(matches) == 1, f"no single stage named {name!r}"
    return matches[0]


def venv_dir(final: Stage) -> str:
    path = next(env_of(i)["PATH"] for i in final.of("ENV") if "PATH" in env_of(i))
    first = path.split(":")[0]
    assert first.endswith("/bin"), f"the final stage's PATH starts with {first!r}, not a venv's bin"
    return first.removesuffix("/bin")


# --- Dockerfile -----------------------------------------------------------------------------------


def global_args() -> dict[str, str]:
    """The ``ARG NAME=default`` lines before the first FROM (what a FROM line may name)."""
    found: dict[str, str] = {}
    for instruction in parse_instructions(DOCKERFILE.read_text()):
        if instruction.keyword == "FROM":
            break
        name, _, default = instruction.args.partition("=")
        found[name] = default
    return found


def resolved_base(base: str) -> str:
    """A FROM's image with ``${ARG}`` replaced by that argument's default."""
    args = global_args()
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: args.get(m.group(1), m.group(0)), base)


def test_it_is_multi_stage_and_every_base_is_pinned_by_digest(stages: list[Stage]) -> None:
    assert len(stages) >= 2, "a build stage and a final stage"
    earlier: set[str] = set()
    for stage in stages:
        assert stage.base in earlier or DIGEST.search(resolved_base(stage.base)), (
            f"FROM {stage.base}: pin it (or its ARG's default) by @sha256 digest, or FROM an earlier stage"
        )
        if stage.name:
            earlier.add(stage.name)
    external = [s.base for s in stages if s.base not in earlier]
    assert external == ["${BASE_IMAGE}"], f"one base, taken from ARG BASE_IMAGE: {external}"


def test_the_base_is_python_3_11_like_the_lock(stages: list[Stage], final: Stage) -> None:
    bases = {resolved_base(s.base) for s in stages if DIGEST.search(resolved_base(s.base))}
    assert len(bases) == 1, f"one base image, pinned in one place: {bases}"
    (base,) = bases
    tag = base.removeprefix("docker.io/").removeprefix("library/").split("@")[0]
    assert tag.startswith("python:3.11-slim"), base
    assert "autogenerated by pip-compile with Python 3.11" in LOCK.read_text()
    labels = {}
    for word in shlex.split(" ".join(i.args for i in final.of("LABEL"))):
        key, _, value = word.partition("=")
        labels[key] = value
    # The label names the base the image was really built on, whichever BASE_IMAGE that was.
    assert labels.get("org.opencontainers.image.base.name") == "${BASE_IMAGE}"
    assert [i.args for i in final.of("ARG")] == ["BASE_IMAGE"], "the final stage must declare ARG BASE_IMAGE"


def test_the_final_stage_runs_as_a_numeric_non_root_user(final: Stage) -> None:
    users = final.of("USER")
    assert users, "the final stage sets no USER: it would run as root"
    user, _, group = users[-1].args.partition(":")
    assert user.isdigit(), f"USER {users[-1].args}: numeric, so that runAsNonRoot can verify it"
    assert int(user) != 0, "USER 0 is root"
    assert not group or (group.isdigit() and int(group) != 0), f"group {group!r}: numeric and not root"
    later = [i for i in final.instructions if i.line > users[-1].line and i.keyword == "RUN"]
    assert not later, "nothing runs after USER that would need root"


def test_the_lock_is_installed_with_require_hashes(stages: list[Stage]) -> None:
    build = stage_named(stages, "build")
    copied = [w for i in build.of("COPY") for w in i.operands()[:-1]]
    assert "requirements.lock" in copied and "requirements-build.lock" in copied
    installs = [c for i in build.of("RUN") for c in commands_of(i) if re.search(r"\bpip\b.*\binstall\b", c)]
    # The runtime dependencies and the build tools (setuptools, wheel: never the base's own).
    from_locks = [c for c in installs if re.search(r"-r requirements(-build)?\.lock\b", c)]
    assert len(from_locks) == 2, installs
    for command in from_locks:
        for flag in ("--require-hashes", "--no-deps", "--only-binary=:all:"):
            assert flag in command, f"{flag} missing from {command!r}"
    wheel = [c for i in build.of("RUN") for c in commands_of(i) if re.search(r"\bpip\b.*\bwheel\b", c)]
    assert wheel and all(c.startswith("/opt/build-tools/bin/python") for c in wheel), wheel
    # Every other install is the project's own wheel, built in this stage: no dependency, no index.
    for command in installs:
        if command not in from_locks:
            assert "--no-deps" in command and "--no-index" in command, command
            assert re.search(r"\s/\S+\.whl$", command), f"not a local wheel: {command!r}"


def test_the_final_stage_has_the_venv_and_nothing_else(stages: list[Stage], final: Stage) -> None:
    venv = venv_dir(final)
    build = stage_named(stages, "build")
    assert any(re.search(rf"-m venv( --\S+)* {venv}$", c) for i in build.of("RUN") for c in commands_of(i)), (
        f"the build stage makes no venv at {venv}"
    )
    assert not final.of("ADD"), "ADD in the final stage"
    stage_names = {s.name for s in stages[:-1]}
    for copy in final.of("COPY"):
        assert copy.flags().get("from") in stage_names, f"line {copy.line}: COPY from the context"
        sources = copy.operands()[:-1]
        assert sources == [venv] or all(s.startswith("/rootfs/") for s in sources), (
            f"line {copy.line}: copies {sources}, not the venv"
        )
    assert [c.operands() for c in final.of("COPY") if c.operands()[0] == venv] == [[venv, venv]]


def test_no_build_tool_or_install_reaches_the_final_image(stages: list[Stage], final: Stage) -> None:
    """No compiler, package manager or pip run in the final stage or in the stages it is built on."""
    for stage in ancestry(stages, final):
        for instruction in stage.of("RUN"):
            tool = BUILD_TOOLS.search(instruction.args)
            assert tool is None, f"line {instruction.line}: {tool and tool.group()} in stage {stage.name}"


def test_no_secret_in_the_recipe(stages: list[Stage]) -> None:
    for stage in stages:
        for instruction in stage.of("ENV") + stage.of("ARG"):
            for name in env_of(instruction):
                assert not SECRET_NAME.search(name), f"line {instruction.line}: {instruction.keyword} {name}"
        for instruction in stage.of("COPY") + stage.of("ADD"):
            for source in instruction.operands()[:-1]:
                assert not SECRET_FILE.search(source), f"line {instruction.line}: copies {source}"
        for instruction in stage.of("RUN"):
            assert not re.search(r"Authorization:|Bearer |--password|://[^/\s]+:[^@\s]+@", instruction.args)


def test_the_entrypoint_is_the_operator_from_the_venv(final: Stage) -> None:
    (entrypoint,) = final.of("ENTRYPOINT")
    assert entrypoint.operands() == ["python", "-m", "bundle_operator"], "exec form, the operator module"
    assert entrypoint.args.startswith("["), "exec form: the process gets SIGTERM, not a shell"
    assert (ROOT / "operator" / "bundle_operator" / "__main__.py").is_file()
    venv = venv_dir(final)
    assert any(c.operands() == [venv, venv] for c in final.of("COPY")), "`python` is the venv's"


def test_the_default_command_is_valid_operator_flags(final: Stage, monkeypatch: pytest.MonkeyPatch) -> None:
    """CMD parses with the operator's own parser (that of `python -m bundle_operator`)."""
    monkeypatch.delenv(ENV_TOKEN, raising=False)
    monkeypatch.delenv(ENV_URL, raising=False)
    (cmd,) = final.of("CMD")
    assert cmd.args.startswith("["), "exec form"
    parser = argparse.ArgumentParser(prog="python -m bundle_operator")
    run_options.add_arguments(parser)
    options = run_options.options_from(parser.parse_args(cmd.operands()))
    assert options.all_namespaces
    exposed = {int(port) for i in final.of("EXPOSE") for port in i.operands()}
    assert {options.metrics_port, options.health_port} == exposed, "EXPOSE the ports the command serves"


def documented_platform_commands() -> list[tuple[Path, list[str]]]:
    found: list[tuple[Path, list[str]]] = []
    for path in (DOCKERFILE, DOCS):
        for match in re.finditer(r"--entrypoint bundlectl \S+ (platform serve[^`\n]*)", path.read_text()):
            found.append((path, shlex.split(match.group(1))))
    return found


def test_the_documented_platform_command_parses() -> None:
    """`bundlectl platform serve ...` as the Dockerfile and docs/how-to/image.md give it, by its parser."""
    scripts = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    assert scripts["bundlectl"] == "bundle_operator.cli:main"
    commands = documented_platform_commands()
    assert {path for path, _ in commands} == {DOCKERFILE, DOCS}
    for path, argv in commands:
        args = cli.build_parser().parse_args(argv)
        assert args.host == "0.0.0.0", f"{path.name}: listen beyond the container's loopback"
        assert str(args.db).startswith("/data/"), f"{path.name}: the database in the writable /data"


def page_blocks() -> list[list[list[str]]]:
    """The sh blocks docs/how-to/image.md hands to this test, each a list of commands as words."""
    marker = "<!-- scene: tested-by tests/unit/test_image.py -->\n```sh\n"
    blocks: list[list[list[str]]] = []
    for body in re.findall(re.escape(marker) + r"(.*?)^```", DOCS.read_text(), re.MULTILINE | re.DOTALL):
        joined = re.sub(r"\\\n\s*", " ", body)
        lines = (line.strip() for line in joined.splitlines())
        commands = [line for line in lines if line and not line.startswith("#")]
        blocks.append([shlex.split(line, comments=True) for line in commands])
    return blocks


def test_the_documented_make_lines_build_what_they_say() -> None:
    """Each `make image...` line of the page runs scripts/image.py with the target and values shown."""
    makes = [words for block in page_blocks() for words in block if words[0] == "make"]
    assert {words[1] for words in makes} == {"image", "image-base"}
    for words in makes:
        argv = ["make", "-n", *words[1:]]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
        (recipe,) = [line for line in done.stdout.splitlines() if "scripts/image.py" in line]
        assert recipe.endswith("scripts/image.py " + ("build" if words[1] == "image" else "base")), recipe
        for setting in words[2:]:
            assert setting in recipe.split(), f"{setting} does not reach the build: {recipe}"


def test_the_documented_run_commands_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's `podman run` lines give the image arguments its entrypoint (or bundlectl) accepts."""
    monkeypatch.delenv(ENV_TOKEN, raising=False)
    monkeypatch.delenv(ENV_URL, raising=False)
    runs = [words for block in page_blocks() for words in block if words[:2] == ["podman", "run"]]
    assert len(runs) == 2
    for words in runs:
        image = next(i for i, word in enumerate(words) if word.startswith("localhost/bundle-operator:"))
        if "--entrypoint" in words:
            assert words[words.index("--entrypoint") + 1] == "bundlectl"
            args = cli.build_parser().parse_args(words[image + 1 :])
            assert args.host == "0.0.0.0" and str(args.db).startswith("/data/")
        else:
            parser = argparse.ArgumentParser(prog="python -m bundle_operator")
            run_options.add_arguments(parser)
            options = run_options.options_from(parser.parse_args(words[image + 1 :]))
            assert options.namespaces and not options.all_namespaces


# --- .dockerignore --------------------------------------------------------------------------------


def dockerignore_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex (Go filepath.Match plus `**`)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out += pattern[i : end + 1]
            i = end + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def excluded(path: str, patterns: list[str]) -> bool:
    """Whether the build context leaves path out: the last matching pattern wins, and a pattern
    that matches a parent directory matches everything in it."""
    prefixes = ["/".join(path.split("/")[: n + 1]) for n in range(path.count("/") + 1)]
    verdict = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = dockerignore_regex(pattern.removeprefix("!").strip("/"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            verdict = not negated
    return verdict


@pytest.fixture(scope="module")
def ignore_patterns() -> list[str]:
    lines = (line.strip() for line in DOCKERIGNORE.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".git/HEAD",
        "tmp/devcluster/kubeconfig",
        "tests/unit/test_image.py",
        "bench/gateway.py",
        ".mypy_cache/3.11/x.json",
        ".pytest_cache/v/cache/lastfailed",
        ".ruff_cache/CACHEDIR.TAG",
        ".hypothesis/examples/x",
        "operator/bundle_operator/__pycache__/cli.cpython-311.pyc",
        "operator/bundle_operator.egg-info/PKG-INFO",
        "operator/bundle_operator/.env",
        ".env",
        "kubeconfig",
        "operator/bundle_operator/k8s/kubeconfig",
        "operator/bundle_operator/tls.key",
    ],
)
def test_the_build_context_leaves_out(path: str, ignore_patterns: list[str]) -> None:
    assert excluded(path, ignore_patterns)


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "requirements.lock",
        "operator/bundle_operator/__main__.py",
        "operator/bundle_operator/platform/openapi.yaml",
        "operator/bundle_operator/py.typed",
    ],
)
def test_the_build_context_keeps(path: str, ignore_patterns: list[str]) -> None:
    assert not excluded(path, ignore_patterns)


def test_every_context_path_the_dockerfile_copies_is_in_the_context(
    stages: list[Stage], ignore_patterns: list[str]
) -> None:
    for stage in stages:
        for copy in stage.of("COPY"):
            if "from" not in copy.flags():
                for source in copy.operands()[:-1]:
                    assert (ROOT / source).exists(), source
                    assert not excluded(source, ignore_patterns), f"{source} is left out of the context"


# --- requirements.lock ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    name: NormalizedName
    version: Version
    hashes: tuple[str, ...]


def parse_lock(text: str) -> list[Pin]:
    """The lock's requirements, continuation lines joined, comments dropped."""
    entries: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        current += " " + line.removesuffix("\\").strip()
        if not line.endswith("\\"):
            entries.append(current.strip())
            current = ""
    assert not current, "the lock ends inside a continued requirement"
    pins: list[Pin] = []
    for entry in entries:
        assert not entry.startswith("-"), f"an option line in the lock: {entry!r}"
        spec, *options = re.split(r"\s+(?=--)", entry)
        requirement = Requirement(spec)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{entry!r}: not pinned with =="
        hashes = tuple(option.removeprefix("--hash=") for option in options if option.startswith("--hash="))
        assert len(hashes) == len(options), f"{entry!r}: an option other than --hash"
        pins.append(Pin(canonicalize_name(requirement.name), Version(specifier.version), hashes))
    return pins


@pytest.fixture(scope="module")
def lock() -> dict[NormalizedName, Pin]:
    pins = parse_lock(LOCK.read_text())
    by_name = {pin.name: pin for pin in pins}
    assert len(by_name) == len(pins), "a package pinned twice"
    return by_name


@pytest.fixture(scope="module")
def project() -> dict[str, Any]:
    table: dict[str, Any] = tomllib.loads(PYPROJECT.read_text())["project"]
    return table


def test_every_requirement_is_pinned_with_hashes(lock: dict[NormalizedName, Pin]) -> None:
    assert lock
    for pin in lock.values():
        assert pin.hashes, f"{pin.name}=={pin.version} has no --hash"
        for value in pin.hashes:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", value), f"{pin.name}: {value}"


def test_the_lock_covers_every_runtime_dependency(
    lock: dict[NormalizedName, Pin], project: dict[str, Any]
) -> None:
    for line in project["dependencies"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{requirement.name} (pyproject.toml) is not in requirements.lock: make lock"
        assert requirement.specifier.contains(lock[name].version, prereleases=True), (
            f"{name}=={lock[name].version} in the lock does not satisfy {line!r}: make lock"
        )


def test_the_lock_has_no_dev_extra(lock: dict[NormalizedName, Pin], project: dict[str, Any]) -> None:
    dev = {canonicalize_name(Requirement(line).name) for line in project["optional-dependencies"]["dev"]}
    assert not dev & set(lock), "dev extras in the runtime lock"
    assert canonicalize_name(project["name"]) not in lock, "the project itself is installed from its wheel"


def test_the_lock_says_how_it_was_made() -> None:
    head = LOCK.read_text().split("\n\n", 1)[0][:2000]
    assert head.startswith("#")
    for words in ("make lock", "pip-compile --generate-hashes", "--require-hashes", "aarch64"):
        assert words in head, words
    recipe = IMAGE_MK.read_text()
    assert re.search(r"^lock:", recipe, re.MULTILINE)
    assert "pip-compile" in recipe and "--generate-hashes" in recipe and "tmp/" in recipe
