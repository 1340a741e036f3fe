"""kubectl against a dev cluster, the way a user drives it, plus polling until a state is reached."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class KubectlError(RuntimeError):
    """kubectl exited non-zero; `stderr` holds what it said."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} exited {returncode}: {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


class WaitTimeout(AssertionError):
    """A polled state was not reached in time."""


def wait_until(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.2) -> T:
    """Call `check` until it returns something other than None or False, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result is not None and result is not False:
            return result
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The status condition of the given type, if the object has one."""
    for entry in obj.get("status", {}).get("conditions") or []:
        if entry.get("type") == type_:
            found: Mapping[str, Any] = entry
            return found
    return None


class Kubectl:
    """Runs kubectl with one kubeconfig."""

    def __init__(self, binary: Path, kubeconfig: Path, default_timeout: float = 60.0) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.default_timeout = default_timeout

    def command(self, *args: str) -> list[str]:
        """The argv of a kubectl call, for callers that need a process of their own (a watch)."""
        return [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]

    def run(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl; raise KubectlError on a non-zero exit when `check`."""
        result = subprocess.run(
            self.command(*args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout or self.default_timeout,
        )
        if check and result.returncode != 0:
            raise KubectlError(list(args), result.returncode, result.stderr)
        return result

    def apply(
        self,
        source: Path | str | Mapping[str, Any],
        namespace: str | None = None,
        check: bool = True,
        server_side: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """`kubectl apply` of a file or folder (Path), YAML text (str) or one object (mapping)."""
        args = ["apply"]
        if server_side:
            args.append("--server-side")
        if namespace:
            args += ["-n", namespace]
        if isinstance(source, Path):
            return self.run(*args, "-f", str(source), check=check)
        text = source if isinstance(source, str) else yaml.safe_dump(dict(source))
        return self.run(*args, "-f", "-", stdin=text, check=check)

    def get(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object as JSON."""
        args = ["get", resource, name, "-o", "json"]
        if namespace:
            args += ["-n", namespace]
        obj: dict[str, Any] = json.loads(self.run(*args).stdout)
        return obj

    def get_or_none(self, resource: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """One object as JSON, or None when the server says it does not exist."""
        try:
            return self.get(resource, name, namespace)
        except KubectlError as error:
            if "NotFound" in error.stderr or "not found" in error.stderr:
                return None
            raise

    def wait_for_condition(
        self,
        resource: str,
        name: str,
        type_: str,
        status: str = "True",
        namespace: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Poll until the object has condition `type_` with `status`; return the object."""
        last: dict[str, Any] | None = None

        def reached() -> dict[str, Any] | None:
            nonlocal last
            last = self.get_or_none(resource, name, namespace)
            found = condition(last, type_) if last else None
            return last if found is not None and found.get("status") == status else None

        try:
            return wait_until(reached, timeout or self.default_timeout, f"{resource}/{name} {type_}={status}")
        except WaitTimeout as error:
            seen = (last or {}).get("status", {}).get("conditions")
            raise WaitTimeout(f"{error}; last conditions: {seen}") from None

    def wait_for_deletion(
        self, resource: str, name: str, namespace: str | None = None, timeout: float | None = None
    ) -> None:
        """Poll until the object no longer exists."""
        wait_until(
            lambda: self.get_or_none(resource, name, namespace) is None,
            timeout or self.default_timeout,
            f"{resource}/{name} to be deleted",
        )
