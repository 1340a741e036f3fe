"""Leader election on a ``coordination.k8s.io/v1`` Lease, so that of several replicas exactly one
reconciles and the others wait as standbys.

The rules are client-go's (``tools/leaderelection``), which controller-runtime and the control
plane's own components use, so a reader of ``kubectl get lease`` sees what they already know:

- A candidate reads the Lease every retry period. It takes the Lease when there is none, when
  ``holderIdentity`` is empty (released) or its own, or when the record has not changed for
  ``leaseDurationSeconds`` *as measured by the candidate's own clock since it saw the record
  change*. Clocks of different nodes are never compared, so skew cannot hand out the Lease early.
- Every write is a PUT carrying the ``resourceVersion`` that was read (a create when there is no
  Lease): of two candidates that both saw an expired Lease exactly one write succeeds, the other
  gets 409 Conflict and stays a standby.
- The leader renews every retry period. If no renewal has succeeded for the renew deadline (which
  is shorter than the lease duration) it has lost the Lease; it also has when a read shows another
  holder. The caller must then stop reconciling at once: a standby may take over as soon as the
  lease duration has passed, so the margin between the two is what keeps two leaders apart.
- A leader that stops on purpose releases the Lease (empty holder, one-second duration), so a
  standby takes it at its next retry instead of waiting out the lease duration.

``LeaseApi`` is the four-call protocol the elector needs; ``KubeLeases`` implements it with the
operator's own ``Kube`` client and tests use an in-memory fake that enforces resourceVersion.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Final, NoReturn, Protocol
from urllib.parse import quote

from bundle_operator.k8s.kube import Kube, KubeError
from bundle_operator.k8s.logs import object_extra

log = logging.getLogger(__name__)

LEASE_API_VERSION: Final = "coordination.k8s.io/v1"
DEFAULT_LEASE_NAME: Final = "bundle-operator"
DEFAULT_LEASE_SECONDS: Final = 15
DEFAULT_RENEW_SECONDS: Final = 10.0
DEFAULT_RETRY_SECONDS: Final = 2.0
ENV_POD_NAME: Final = "POD_NAME"
ENV_POD_NAMESPACE: Final = "POD_NAMESPACE"
SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
FALLBACK_NAMESPACE: Final = "default"
# What a release writes as the lease duration: client-go writes 1 s too, so that a candidate of
# either kind that ignores the empty holder still takes over within a second.
RELEASED_LEASE_SECONDS: Final = 1


# --- where and who ----------------------------------------------------------------------------


def default_identity(environ: dict[str, str] | None = None) -> str:
    """``$POD_NAME`` (the Downward API's ``metadata.name``), else ``<hostname>_<pid>``."""
    env = os.environ if environ is None else environ
    pod = (env.get(ENV_POD_NAME) or "").strip()
    if pod:
        return pod
    return f"{socket.gethostname()}_{os.getpid()}"


def default_namespace(
    environ: dict[str, str] | None = None, service_account_file: Path = SERVICE_ACCOUNT_NAMESPACE
) -> str:
    """``$POD_NAMESPACE``, else the in-cluster service account's namespace, else ``default``."""
    env = os.environ if environ is None else environ
    namespace = (env.get(ENV_POD_NAMESPACE) or "").strip()
    if namespace:
        return namespace
    try:
        namespace = service_account_file.read_text().strip()
    except OSError:
        namespace = ""
    return namespace or FALLBACK_NAMESPACE


@dataclass(frozen=True)
class LeaseConfig:
    """Which Lease, who competes for it, and client-go's three durations (seconds)."""

    namespace: str
    name: str
    identity: str
    lease_seconds: int = DEFAULT_LEASE_SECONDS
    renew_seconds: float = DEFAULT_RENEW_SECONDS
    retry_seconds: float = DEFAULT_RETRY_SECONDS

    def __post_init__(self) -> None:
        problem = lease_timing_problem(self.lease_seconds, self.renew_seconds, self.retry_seconds)
        if problem is not None:
            raise ValueError(problem)
        for field_name in ("namespace", "name", "identity"):
            if not getattr(self, field_name):
                raise ValueError(f"leader election needs a non-empty {field_name}")


def lease_timing_problem(lease_seconds: int, renew_seconds: float, retry_seconds: float) -> str | None:
    """Why the durations cannot work together, in one line; None when they can.

    The lease must outlast the renew deadline (the leader has stopped before anyone may take
    over) and the renew deadline must leave room for more than one retry.
    """
    if retry_seconds <= 0:
        return "the retry period must be positive"
    if renew_seconds <= retry_seconds:
        return (
            f"the renew deadline ({renew_seconds:g}s) must be longer than the retry period "
            f"({retry_seconds:g}s)"
        )
    if lease_seconds <= renew_seconds:
        return (
            f"the lease duration ({lease_seconds}s) must be longer than the renew deadline "
            f"({renew_seconds:g}s)"
        )
    return None


# --- the API ----------------------------------------------------------------------------------


class LeaseApi(Protocol):
    """The Lease calls the elector makes. Errors are ``KubeError``; 409 on a stale
    ``metadata.resourceVersion`` (replace) or an existing object (create)."""

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease, or None when there is none."""
        ...

    async def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the Lease; the created object."""
        ...

    async def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT the Lease, preconditioned on ``body.metadata.resourceVersion``; the stored object."""
        ...


def _lease_collection(namespace: str) -> str:
    return f"/apis/{LEASE_API_VERSION}/namespaces/{quote(namespace, safe='')}/leases"


class KubeLeases:
    """``LeaseApi`` over the operator's ``Kube`` client; failures are ``KubeError`` with the status."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._kube.read(f"{_lease_collection(namespace)}/{quote(name, safe='')}")

    async def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._kube.create(_lease_collection(namespace), body)

    async def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._kube.replace(f"{_lease_collection(namespace)}/{quote(name, safe='')}", body)


# --- the record -------------------------------------------------------------------------------


def micro_time(moment: datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with exactly six fractional digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _spec(lease: dict[str, Any] | None) -> dict[str, Any]:
    spec = (lease or {}).get("spec")
    return dict(spec) if isinstance(spec, dict) else {}


def _holder(spec: dict[str, Any]) -> str:
    holder = spec.get("holderIdentity")
    return holder if isinstance(holder, str) else ""


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class Role(Enum):
    """What this candidate is right now."""

    STANDBY = "standby"
    LEADER = "leader"


class LostLease(Exception):
    """The leader could not keep the Lease; it must stop reconciling at once."""


# --- the elector ------------------------------------------------------------------------------


class LeaderElector:
    """One candidate for one Lease.

    ``acquire()`` waits as a standby until this candidate leads (or the stop event is set);
    ``keep_leading()`` renews until the Lease is lost and then raises ``LostLease``;
    ``release()`` hands the Lease back. ``try_acquire_or_renew()`` is the single step the loops
    repeat. ``clock`` is monotonic seconds and ``sleep`` waits on it; ``now`` is the wall clock
    written into the Lease (never compared with another node's).
    """

    def __init__(
        self,
        api: LeaseApi,
        config: LeaseConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        now: Callable[[], datetime] = _utcnow,
        on_role: Callable[[Role], None] | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self._clock = clock
        self._sleep = sleep
        self._now = now
        self._on_role = on_role
        self.role = Role.STANDBY
        # The last spec read or written and when (our clock) it was first seen as it is.
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._last_contact: float | None = None
        self._last_holder: str | None = None
        # When the attempt that last renewed began: the renew deadline counts from there.
        self._renewed_at: float | None = None

    @property
    def leading(self) -> bool:
        """True while this candidate holds the Lease."""
        return self.role is Role.LEADER

    @property
    def holder(self) -> str:
        """The holder in the last record seen ("" when free or not read yet)."""
        return _holder(self._observed_spec or {})

    def in_contact(self, within: float | None = None) -> bool:
        """True when a read or write of the Lease succeeded within ``within`` seconds (default:
        the lease duration), so this candidate could take over if the leader went away."""
        if self._last_contact is None:
            return False
        limit = self.config.lease_seconds if within is None else within
        return self._clock() - self._last_contact <= limit

    # --- one step ---------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """Read the Lease once and take or renew it if this candidate may; True when it leads.

        A write that loses a race (409) is not an error: the answer is simply False. Transport
        and server errors propagate as ``KubeError``.
        """
        cfg = self.config
        started = self._clock()
        current = await self.api.get(cfg.namespace, cfg.name)
        self._last_contact = self._clock()
        wall = micro_time(self._now())
        if current is None:
            body = {
                "apiVersion": LEASE_API_VERSION,
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": self._spec_for(acquire_time=wall, renew_time=wall, transitions=0),
            }
            try:
                created = await self.api.create(cfg.namespace, body)
            except KubeError as exc:
                if exc.conflict:  # another candidate created it first
                    return False
                raise
            self._won(created, started, previous="")
            return True

        spec = _spec(current)
        # Seen as of the answer, not the request: the record may have been written in between.
        self._observe(spec, self._last_contact)
        holder = _holder(spec)
        if holder != self._last_holder and holder != cfg.identity:
            self._last_holder = holder
            self._log_holder(holder, current)
        duration = _int(spec.get("leaseDurationSeconds"), cfg.lease_seconds)
        if holder and holder != cfg.identity and self._last_contact < self._observed_at + duration:
            return False  # held by another (a leader that sees this has lost it: keep_leading says so)

        ours = holder == cfg.identity
        transitions = _int(spec.get("leaseTransitions"), 0)
        acquire_time = spec.get("acquireTime") if ours and isinstance(spec.get("acquireTime"), str) else wall
        body = dict(current)
        body["spec"] = {
            **spec,
            **self._spec_for(
                acquire_time=str(acquire_time),
                renew_time=wall,
                transitions=transitions if ours else transitions + 1,
            ),
        }
        try:
            stored = await self.api.replace(cfg.namespace, cfg.name, body)
        except KubeError as exc:
            if exc.conflict:  # someone wrote since our read; the next read tells who
                return False
            raise
        self._won(stored, started, previous=holder)
        return True

    def _spec_for(self, *, acquire_time: str, renew_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": self.config.lease_seconds,
            "acquireTime": acquire_time,
            "renewTime": renew_time,
            "leaseTransitions": transitions,
        }

    def _observe(self, spec: dict[str, Any], at: float) -> None:
        # Expiry is judged by how long the record has stayed the same on our clock, as client-go
        # does: the holder's renewTime is its clock, not ours.
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = at

    def _won(self, stored: dict[str, Any], started: float, previous: str) -> None:
        self._observe(_spec(stored), started)
        self._last_contact = self._clock()
        self._renewed_at = started
        self._last_holder = self.config.identity
        if not self.leading:
            spec = _spec(stored)
            log.info(
                "leader election: %s now leads (lease transitions %s, previous holder %s)",
                self.config.identity,
                spec.get("leaseTransitions", 0),
                previous or "(none)",
                extra=self._extra(stored),
            )
            self._set_role(Role.LEADER)

    def _set_role(self, role: Role) -> None:
        self.role = role
        if self._on_role is not None:
            self._on_role(role)

    def _extra(self, lease: dict[str, Any] | None = None) -> dict[str, Any]:
        uid = ((lease or {}).get("metadata") or {}).get("uid")
        return object_extra("Lease", self.config.namespace, self.config.name, uid if uid else None)

    def _log_holder(self, holder: str, lease: dict[str, Any]) -> None:
        if holder:
            log.info(
                "leader election: standby as %s; the lease is held by %s",
                self.config.identity,
                holder,
                extra=self._extra(lease),
            )
        else:
            log.info("leader election: the lease is free", extra=self._extra(lease))

    # --- the loops --------------------------------------------------------------------------

    async def acquire(self, stop: asyncio.Event | None = None) -> bool:
        """Try every retry period until this candidate leads (True) or ``stop`` is set (False)."""
        cfg = self.config
        log.info(
            "leader election: %s is a candidate for lease %s/%s",
            cfg.identity,
            cfg.namespace,
            cfg.name,
            extra=self._extra(),
        )
        while stop is None or not stop.is_set():
            try:
                # A hung call must not keep a standby from trying again.
                async with asyncio.timeout(cfg.renew_seconds):
                    if await self.try_acquire_or_renew():
                        return True
            except (KubeError, TimeoutError) as exc:
                log.warning(
                    "leader election: cannot read or write the lease: %s", _describe(exc), extra=self._extra()
                )
            if await self._pause(cfg.retry_seconds, stop):
                break
        return False

    async def keep_leading(self) -> None:
        """Renew every retry period; raise ``LostLease`` once the Lease is gone.

        It is gone when a read shows another holder, or when no renewal has succeeded for the
        renew deadline (counted from the start of the last successful attempt, so a slow answer
        never stretches it). Each attempt is cut off at that deadline.
        """
        cfg = self.config
        if not self.leading or self._renewed_at is None:
            raise LostLease("not the leader")
        while True:
            deadline = self._renewed_at + cfg.renew_seconds
            await self._sleep(max(0.0, min(cfg.retry_seconds, deadline - self._clock())))
            remaining = deadline - self._clock()
            if remaining <= 0:
                self._lose(f"no renewal succeeded within the renew deadline of {cfg.renew_seconds:g}s")
            failure = ""
            try:
                async with asyncio.timeout(remaining):
                    renewed = await self.try_acquire_or_renew()
            except TimeoutError:
                self._lose(f"no renewal succeeded within the renew deadline of {cfg.renew_seconds:g}s")
            except KubeError as exc:
                renewed, failure = False, _describe(exc)
            if renewed:
                continue
            holder = self.holder
            if holder and holder != cfg.identity:
                self._lose(f"the lease is now held by {holder}")
            left = deadline - self._clock()
            log.warning(
                "leader election: renewing the lease failed (%s); %.1fs left before it is lost",
                failure or "conflict",
                max(left, 0.0),
                extra=self._extra(),
            )

    def _lose(self, reason: str) -> NoReturn:
        self._renewed_at = None
        self._set_role(Role.STANDBY)
        log.error("leader election: %s lost the lease: %s", self.config.identity, reason, extra=self._extra())
        raise LostLease(reason)

    async def release(self) -> bool:
        """Give the Lease back if this candidate holds it; True when the release was written.

        Only call this once nothing reconciles any more: a standby takes over at its next retry.
        It gives up after the renew deadline; the Lease then simply expires.
        """
        cfg = self.config
        if not self.leading:
            return False
        self._renewed_at = None
        self._set_role(Role.STANDBY)
        try:
            async with asyncio.timeout(cfg.renew_seconds):
                for _ in range(2):  # a 409 means a write since our read: read again once
                    current = await self.api.get(cfg.namespace, cfg.name)
                    spec = _spec(current)
                    if current is None or _holder(spec) != cfg.identity:
                        return False
                    wall = micro_time(self._now())
                    body = dict(current)
                    body["spec"] = {
                        **spec,
                        "holderIdentity": "",
                        "leaseDurationSeconds": RELEASED_LEASE_SECONDS,
                        "acquireTime": wall,
                        "renewTime": wall,
                    }
                    try:
                        await self.api.replace(cfg.namespace, cfg.name, body)
                    except KubeError as exc:
                        if exc.conflict:
                            continue
                        raise
                    log.info(
                        "leader election: %s released the lease", cfg.identity, extra=self._extra(current)
                    )
                    return True
        except (KubeError, TimeoutError) as exc:
            log.warning(
                "leader election: releasing the lease failed (%s); a standby takes over once it expires",
                _describe(exc),
                extra=self._extra(),
            )
        return False

    async def _pause(self, seconds: float, stop: asyncio.Event | None) -> bool:
        """Sleep ``seconds``; True when ``stop`` was set meanwhile (the sleep ends early then)."""
        if stop is None:
            await self._sleep(seconds)
            return False
        if stop.is_set():
            return True
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, stopper):
                task.cancel()
            await asyncio.gather(sleeper, stopper, return_exceptions=True)
        return stop.is_set()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KubeError):
        return f"{exc.status} {exc.reason}".strip() if exc.status else f"unreachable ({exc.message})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return type(exc).__name__
