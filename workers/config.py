"""A worker process's settings: the ``WORKER_*`` names of ``WORKQUEUE`` (defaults in
``wqcore/conf.py``), validated at start together.

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
from workqueue import runtime
from workqueue.runtime import handled_kinds, handler_for, is_async, needs_threads
from wqcore.conf import wq_settings

DEFAULT_METRICS_PORT = 9100
# With the default port taken (another worker on this host), the next free one of these.
METRICS_PORT_SPAN = 100


# The lease keeper's thread renews on one system connection of its own (``offloop.py``).
LEASE_CONNECTIONS = 1


@dataclass(frozen=True)
class Connections:
    """What a worker process opens, besides one connection per handler thread: the store's
    async pools (tenant, system, the claims': ``WORKER_TENANT_POOL_SIZE``,
    ``WORKER_SYSTEM_POOL_SIZE``, ``WORKER_CLAIM_POOL_SIZE``), the listener, the heartbeat's
    publisher, the maintenance thread (the outbox relay and the sweep, on the everyday and
    system logins, and the sweep's mutex), and the lease keeper's thread (its renewals, on the
    system login). The budget that capacity is checked against (``WORKER_DB_POOL_SIZE``) is
    derived from this, not kept in step by hand."""

    store_tenant: int
    # Completions and the rest.
    store_system: int
    # The claims, two at once while a backlog drains (sessions that plan them generically).
    store_claim: int
    listen: int = listen.CONNECTIONS
    liveness: int = 1
    maintenance: int = 3
    lease: int = LEASE_CONNECTIONS

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
    "liveness": "heartbeat",
    "maintenance": "relay and sweep",
    "lease": "lease keeper",
}


def _setting(name: str) -> Any:
    """A default read from ``WORKQUEUE`` (wqcore/conf.py holds it), for a field not given."""
    return dataclasses.field(default_factory=lambda: getattr(wq_settings, name))


@dataclass(frozen=True)
class WorkerSettings:
    kinds: tuple[str, ...]
    lane: str = "default"
    # Items run at once. None: two claim batches when every handler is async and none uses
    # threads (the next batch is claimed while the last one's handlers run, so the claim's round
    # trip and the handlers' Python overlap: README, "Benchmarks"); when any is sync (one thread
    # and one connection each), what the pool leaves after the worker's own connections. (An
    # async handler that only sometimes uses threads, ``uses_threads``, keeps one batch and
    # gets the threads the pool leaves: see ``threads``; a second batch would only wait for
    # them.)
    capacity: int | None = None
    # The most items one claim statement takes.
    claim_batch: int = 100
    lease_s: float = 30.0
    # Bounds each lease renewal; a renewal that takes longer counts as failed. None: 5 s, or a
    # third of the lease when that is shorter.
    renew_timeout_s: float | None = None
    # Warn (worker_loop_blocked, and a counter) when the event loop has not run for this long:
    # an async handler blocking it (time.sleep, a sync driver) stalls every item on the loop.
    # 0 turns the watchdog off.
    loop_blocked_warn_s: float = 1.0
    # The fallback when no work_available notice arrives (a notice wakes the worker at once).
    poll_interval_ms: int = 1000
    # The longest pause between claims while the database is unreachable (backing off).
    outage_backoff_max_s: float = 10.0
    heartbeat_interval_s: float = 5.0
    # /healthz answers 503 once the in-memory beat is older than this many intervals.
    stale_after_beats: int = 3
    shutdown_grace_s: float = 30.0
    # Completions wait at most this long to share one statement.
    complete_flush_ms: int = 2
    metrics_host: str = "127.0.0.1"
    # 0 picks a free port (logged at start); -1 serves no endpoint. Left at its default, a
    # taken port moves on to the next free one (several workers per host); set explicitly, a
    # taken port stops the worker with one line.
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_port_fixed: bool = False
    # The database connections this process may open.
    db_pool_size: int = 20
    # The store's async pools (Connections).
    tenant_pool_size: int = _setting("WORKER_TENANT_POOL_SIZE")
    system_pool_size: int = _setting("WORKER_SYSTEM_POOL_SIZE")
    claim_pool_size: int = _setting("WORKER_CLAIM_POOL_SIZE")
    # Run the sweep in this process too (one runworker alone is then a complete deployment).
    sweep: bool = True
    once: bool = False

    @classmethod
    def from_settings(cls, kinds: tuple[str, ...], **overrides: Any) -> WorkerSettings:
        """The worker's settings: ``WORKQUEUE["WORKER_<NAME>"]`` for each field, then the
        command line's ``overrides`` (those not None)."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name in ("kinds", "once", "metrics_port_fixed"):
                continue
            values[field.name] = getattr(wq_settings, f"WORKER_{field.name.upper()}")
        # Named (not None): a taken port stops the worker instead of moving on to the next.
        values["metrics_port_fixed"] = values["metrics_port"] is not None
        if values["metrics_port"] is None:
            values["metrics_port"] = DEFAULT_METRICS_PORT
        given = {k: v for k, v in overrides.items() if v is not None}
        if "metrics_port" in given:
            values["metrics_port_fixed"] = True
        values.update(given)
        settings = cls(kinds=kinds, **values)
        settings.validate()
        return settings

    def __post_init__(self) -> None:
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
        return Connections(self.tenant_pool_size, self.system_pool_size, self.claim_pool_size)

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
        """One clear message for the wrong settings, naming what to change."""
        problems = []
        if not self.kinds:
            problems.append(
                "name at least one kind to run (runworker KIND, or KIND_A,KIND_B; known: "
                f"{', '.join(runtime.known_kinds()) or 'none registered'})"
            )
        for kind in self.kinds:
            if kind not in runtime.known_kinds():
                problems.append(
                    f"unknown kind {kind!r} (known: {', '.join(runtime.known_kinds())})"
                )
            elif handler_for(kind) is None:
                problems.append(
                    f"no worker handles {kind!r} (handled: {', '.join(handled_kinds())})"
                )
        try:
            runtime.check_lane(self.lane, "--lane/WORKER_LANE")
        except runtime.InvalidPayload as exc:
            problems.append(str(exc))
        assert self.capacity is not None
        if self.capacity < 1:
            problems.append(f"--capacity/WORKER_CAPACITY must be at least 1 (got {self.capacity})")
        if self.lease_s < 1:
            problems.append(f"WORKER_LEASE_S must be at least 1 (got {self.lease_s})")
        assert self.renew_timeout_s is not None
        if not 0 < self.renew_timeout_s <= self.lease_s / 3:
            problems.append(
                f"WORKER_RENEW_TIMEOUT_S must be above 0 and at most a third of the lease "
                f"({self.lease_s / 3:g}); got {self.renew_timeout_s}"
            )
        for name in (
            "poll_interval_ms",
            "heartbeat_interval_s",
            "claim_batch",
            "stale_after_beats",
            "outage_backoff_max_s",
            "db_pool_size",
            "tenant_pool_size",
            "system_pool_size",
            "claim_pool_size",
        ):
            if getattr(self, name) <= 0:
                problems.append(f"WORKER_{name.upper()} must be above 0")
        if self.loop_blocked_warn_s < 0:
            problems.append(
                f"WORKER_LOOP_BLOCKED_WARN_S must be >= 0 (0 turns the warning off); "
                f"got {self.loop_blocked_warn_s}"
            )
        if self.shutdown_grace_s < 0 or self.complete_flush_ms < 0:
            problems.append("WORKER_SHUTDOWN_GRACE_S and WORKER_COMPLETE_FLUSH_MS must be >= 0")
        if not -1 <= self.metrics_port <= 65535:
            problems.append(
                f"--metrics-port/WORKER_METRICS_PORT must be a port (1-65535), 0 for any free "
                f"port or -1 for none (got {self.metrics_port})"
            )
        own = self.connections.own()
        if not problems and own > self.db_pool_size:
            problems.append(
                f"the worker's own connections, {self.connections.describe()}, need "
                f"WORKER_DB_POOL_SIZE {own} or more (it is {self.db_pool_size}): raise it, or "
                f"lower WORKER_TENANT_POOL_SIZE, WORKER_SYSTEM_POOL_SIZE or WORKER_CLAIM_POOL_SIZE"
            )
        if not problems and self.needs_threads:
            needed = self.threads + own
            if needed > self.db_pool_size and not self.runs_sync_handlers:
                problems.append(
                    f"the worker's own {own} connections and one handler thread need "
                    f"WORKER_DB_POOL_SIZE {own + 1} or more (it is {self.db_pool_size}): raise it"
                )
            elif needed > self.db_pool_size:
                problems.append(
                    f"capacity {self.capacity} runs sync handlers, one database connection each, "
                    f"plus {own} of the worker's own: {needed} connections, but "
                    f"WORKER_DB_POOL_SIZE is {self.db_pool_size}; lower --capacity to "
                    f"{self.db_pool_size - own} or raise WORKER_DB_POOL_SIZE"
                )
        if problems:
            raise ImproperlyConfigured("; ".join(problems))
