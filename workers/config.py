"""A worker process's settings: a view of the ``WORKER_*`` names of ``WORKQUEUE`` (their
defaults, bounds and meanings in ``wqcore/conf.py``), checked at start together.

Every name carries its unit. Command-line options (``--lane``, ``--capacity``, ...) override
the settings (``WORKER_LANE``, ``WORKER_CAPACITY``, ...). A wrong value is refused with one
line naming the setting to change.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from workers import listen
from workers.listen import WOKEN_CLAIM_CONNECTIONS
from workqueue import runtime
from workqueue.runtime import handled_kinds, handler_for, is_async, needs_threads
from wqcore.conf import wq_settings
from wqcore.confview import View, setting

DEFAULT_METRICS_PORT = 9100
# With the default port taken (another worker on this host), the next free one of these.
METRICS_PORT_SPAN = 100


# The lease keeper's thread renews on one system connection of its own (``offloop.py``).
LEASE_CONNECTIONS = 1


@dataclass(frozen=True)
class Connections:
    """What a worker process opens, besides one connection per handler thread: the store's
    async pools (tenant, system, the claims': ``WORKER_TENANT_POOL_SIZE``,
    ``WORKER_SYSTEM_POOL_SIZE``, ``WORKER_CLAIM_POOL_SIZE``), the listener and its thread's
    woken claim, the heartbeat's publisher, the maintenance thread (the outbox relay and the
    sweep, on the everyday and system logins, and the sweep's mutex), and the lease keeper's
    thread (its renewals, on the system login). The budget that capacity is checked against
    (``WORKER_DB_POOL_SIZE``) is derived from this, not kept in step by hand."""

    store_tenant: int
    # Completions and the rest.
    store_system: int
    # The claims, two at once while a backlog drains (sessions that plan them generically).
    store_claim: int
    listen: int = listen.CONNECTIONS
    # The woken claim, sent from the listener's thread (workers/woken.py).
    woken_claim: int = WOKEN_CLAIM_CONNECTIONS
    liveness: int = 1
    maintenance: int = 3
    lease: int = LEASE_CONNECTIONS
    # The liveness lock's session (0 when the worker takes none: ``holds_liveness_lock``).
    liveness_lock: int = 1

    def own(self) -> int:
        return sum(getattr(self, f.name) for f in dataclasses.fields(self))

    def describe(self) -> str:
        """``12 (tenant pool 2, system pool 2, ...)``, for ``runworker --help`` and messages."""
        parts = ", ".join(
            f"{_LABELS[f.name]} {getattr(self, f.name)}" for f in dataclasses.fields(self)
        )
        return f"{self.own()} ({parts})"


_LABELS = {
    "store_tenant": "tenant pool",
    "store_system": "system pool",
    "store_claim": "claim pool",
    "listen": "LISTEN",
    "woken_claim": "woken claim",
    "liveness": "heartbeat",
    "maintenance": "relay and sweep",
    "lease": "lease keeper",
    "liveness_lock": "liveness lock",
}


# A worker named no kinds, or this: every kind a handler is registered for.
ALL_KINDS = "*"


def served_kinds(named: str, exclude: list[str] | tuple[str, ...] = ()) -> tuple[str, ...]:
    """The kinds a worker runs: those ``named`` (comma-separated), or every handled kind when
    none (or ``*``) is named (items of any kind may be enqueued in any lane, so the lane does
    not narrow them), less ``exclude``. An excluded kind no handler runs is refused: most likely
    a typo."""
    names = [k.strip() for k in named.split(",") if k.strip()]
    if not names or names == [ALL_KINDS]:
        names = handled_kinds()
    unknown = [k for k in exclude if k not in handled_kinds()]
    if unknown:
        handled = ", ".join(handled_kinds())
        raise ImproperlyConfigured(f"--exclude {unknown[0]!r}: no such handled kind ({handled})")
    return tuple(k for k in names if k not in exclude)


@dataclass(frozen=True)
class WorkerSettings(View):
    """A worker's settings: the ``WORKER_*`` names of ``WORKQUEUE`` (each field's), their values
    in effect unless given (the command line's options, a test's), checked by their definitions
    in wqcore/conf.py; then the rules between them and the kinds (``validate``)."""

    kinds: tuple[str, ...]
    lane: str = setting("WORKER_LANE", "--lane")
    # Items run at once. None: two claim batches when every handler is async and none uses
    # threads (the next batch is claimed while the last one's handlers run, so the claim's round
    # trip and the handlers' Python overlap: bench/RESULTS.md); when any is sync (one thread
    # and one connection each), what the pool leaves after the worker's own connections. (An
    # async handler that only sometimes uses threads, ``uses_threads``, keeps one batch and
    # gets the threads the pool leaves: see ``threads``; a second batch would only wait for
    # them.)
    capacity: int | None = setting("WORKER_CAPACITY", "--capacity")
    claim_batch: int = setting("WORKER_CLAIM_BATCH")
    lease_s: float = setting("WORKER_LEASE_S")
    renew_timeout_s: float | None = setting("WORKER_RENEW_TIMEOUT_S")
    loop_blocked_warn_s: float = setting("WORKER_LOOP_BLOCKED_WARN_S")
    poll_interval_ms: int = setting("WORKER_POLL_INTERVAL_MS")
    outage_backoff_max_s: float = setting("WORKER_OUTAGE_BACKOFF_MAX_S")
    heartbeat_interval_s: float = setting("WORKER_HEARTBEAT_INTERVAL_S")
    stale_after_beats: int = setting("WORKER_STALE_AFTER_BEATS")
    shutdown_grace_s: float = setting("WORKER_SHUTDOWN_GRACE_S")
    complete_flush_ms: int = setting("WORKER_COMPLETE_FLUSH_MS")
    progress_flush_s: float = setting("WORKER_PROGRESS_FLUSH_S")
    metrics_host: str = setting("WORKER_METRICS_HOST")
    # None in WORKQUEUE: DEFAULT_METRICS_PORT, or the next free port when it is taken (several
    # workers per host); a port named (the setting, --metrics-port) and taken stops the worker.
    metrics_port: int = setting("WORKER_METRICS_PORT", "--metrics-port")
    metrics_port_fixed: bool = dataclasses.field(init=False, default=False)
    db_pool_size: int = setting("WORKER_DB_POOL_SIZE")
    # The store's async pools (Connections).
    tenant_pool_size: int = setting("WORKER_TENANT_POOL_SIZE")
    system_pool_size: int = setting("WORKER_SYSTEM_POOL_SIZE")
    claim_pool_size: int = setting("WORKER_CLAIM_POOL_SIZE")
    # Run the sweep in this process too (one runworker alone is then a complete deployment).
    sweep: bool = setting("WORKER_SWEEP")
    # A liveness lock from before the first claim (workers/liveness_lock.py), checked this often;
    # a check that has not answered within the rescue's grace less one interval has failed.
    liveness_lock: bool = setting("WORKER_LIVENESS_LOCK")
    liveness_check_s: float = setting("WORKER_LIVENESS_CHECK_S")
    rescue_grace_s: float = setting("SWEEP_RESCUE_GRACE_S")
    # How often this worker offers to turn the ready ring (workqueue/ready.py).
    ready_rotate_s: float = setting("READY_ROTATE_S")
    once: bool = False

    @classmethod
    def from_settings(cls, kinds: tuple[str, ...], **overrides: Any) -> WorkerSettings:
        """The worker's settings with the command line's ``overrides`` (those not None),
        checked whole."""
        settings = cls(kinds, **{k: v for k, v in overrides.items() if v is not None})
        settings.validate()
        return settings

    def __post_init__(self) -> None:
        super().__post_init__()
        given_port: int | None = self.metrics_port  # None until resolved here
        object.__setattr__(self, "metrics_port_fixed", given_port is not None)
        if given_port is None:
            object.__setattr__(self, "metrics_port", DEFAULT_METRICS_PORT)
        if self.renew_timeout_s is None:
            object.__setattr__(self, "renew_timeout_s", min(5.0, self.lease_s / 3))
        if self.capacity is None:
            own = self.connections.own()
            if self.runs_sync_handlers:
                default = self.db_pool_size - own
            else:
                default = self.claim_batch * (1 if self.needs_threads else 2)
            object.__setattr__(self, "capacity", max(default, 1))

    @property
    def connections(self) -> Connections:
        """What this worker opens besides its handler threads."""
        return Connections(
            self.tenant_pool_size,
            self.system_pool_size,
            self.claim_pool_size,
            liveness_lock=int(self.holds_liveness_lock),
        )

    @property
    def holds_liveness_lock(self) -> bool:
        """Whether this worker takes a liveness lock: asked for, and on a session of its own
        (a transaction pooler lends server sessions per transaction: a lock taken through one
        would stay on a session the worker no longer holds, and outlive it)."""
        return self.liveness_lock and wq_settings.POOLER != "transaction"

    def _handlers(self) -> list[Any]:
        return [h for kind in self.kinds if (h := handler_for(kind)) is not None]

    @property
    def runs_sync_handlers(self) -> bool:
        """Whether any handled kind has a sync handler (a thread and a connection per item)."""
        return any(not is_async(h) for h in self._handlers())

    @property
    def needs_threads(self) -> bool:
        """Whether any handled kind runs in threads (a sync handler, or ``uses_threads``)."""
        return any(needs_threads(h) for h in self._handlers())

    @property
    def threads(self) -> int:
        """Handler threads: one per slot when a sync handler runs here; else, for async
        handlers that use threads for some items, what the pool leaves after the worker's own
        connections (at most the capacity): those items wait for a free thread in their slot."""
        assert self.capacity is not None
        if self.runs_sync_handlers:
            return self.capacity
        return max(min(self.capacity, self.db_pool_size - self.connections.own()), 1)

    def validate(self) -> None:
        """One line for the settings that do not fit together or with the kinds, naming what
        to change (each value alone was checked on construction)."""
        problems = self._kind_problems()
        problems += filter(None, (self._lane_problem(), self._lease_problem()))
        if not problems and (problem := self._connection_problem()):
            problems.append(problem)
        if problems:
            raise ImproperlyConfigured("; ".join(problems))

    def _kind_problems(self) -> list[str]:
        known = runtime.known_kinds()
        if not self.kinds:
            listed = ", ".join(known) or "none registered"
            return [f"no kind left to run (known: {listed}; runworker alone runs every one)"]
        problems = []
        for kind in self.kinds:
            if kind not in known:
                problems.append(f"unknown kind {kind!r} (known: {', '.join(known)})")
            elif handler_for(kind) is None:
                problems.append(
                    f"no worker handles {kind!r} (handled: {', '.join(handled_kinds())})"
                )
        return problems

    def _lane_problem(self) -> str | None:
        # The lane's rules are the queue's (workqueue.inputs), not a setting's.
        try:
            runtime.check_lane(self.lane, self.label("lane"))
        except runtime.InvalidPayload as exc:
            return str(exc)
        return None

    def _lease_problem(self) -> str | None:
        assert self.renew_timeout_s is not None
        if self.renew_timeout_s <= self.lease_s / 3:
            return None
        return (
            f"WORKER_RENEW_TIMEOUT_S must be at most a third of WORKER_LEASE_S "
            f"({self.lease_s / 3:g}); got {self.renew_timeout_s}"
        )

    def _connection_problem(self) -> str | None:
        """The worker's own connections and its handler threads within WORKER_DB_POOL_SIZE."""
        own, size = self.connections.own(), self.db_pool_size
        if own > size:
            return (
                f"the worker's own connections, {self.connections.describe()}, need "
                f"WORKER_DB_POOL_SIZE {own} or more (it is {size}): raise it, or lower "
                "WORKER_TENANT_POOL_SIZE, WORKER_SYSTEM_POOL_SIZE or WORKER_CLAIM_POOL_SIZE"
            )
        needed = self.threads + own
        if not self.needs_threads or needed <= size:
            return None
        if not self.runs_sync_handlers:
            return (
                f"the worker's own {own} connections and one handler thread need "
                f"WORKER_DB_POOL_SIZE {own + 1} or more (it is {size}): raise it"
            )
        return (
            f"capacity {self.capacity} runs sync handlers, one database connection each, "
            f"plus {own} of the worker's own: {needed} connections, but WORKER_DB_POOL_SIZE "
            f"is {size}; lower --capacity to {size - own} or raise WORKER_DB_POOL_SIZE"
        )
