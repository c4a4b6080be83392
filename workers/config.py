"""A worker process's settings: defaults in one place, from the environment, validated at start.

Every name carries its unit. Command-line options (``--lane``, ``--capacity``) override the
environment (``WORKER_LANE``, ``WORKER_CAPACITY``, ...).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from workers.handlers import handled_kinds, handler_for, is_async
from workqueue.kinds import known_kinds

# Connections a worker opens besides its handler threads: claim, batch settle and lease
# renewal on the loop, LISTEN, two for failures and releases (tenant and system), liveness.
OWN_CONNECTIONS = 7


@dataclass(frozen=True)
class WorkerSettings:
    kinds: tuple[str, ...]
    lane: str = "default"
    # Items run at once. None: 100 when every handler is async; when any is sync (one thread
    # and one connection each), what the pool leaves after the worker's own connections.
    capacity: int | None = None
    # The most items one claim statement takes.
    claim_batch: int = 100
    lease_s: float = 30.0
    # Bounds each lease renewal; a renewal that takes longer counts as failed.
    renew_timeout_s: float = 5.0
    # The fallback when no work_available notice arrives (a notice wakes the worker at once).
    poll_interval_ms: int = 1000
    heartbeat_interval_s: float = 5.0
    # /healthz answers 503 once the in-memory beat is older than this many intervals.
    stale_after_beats: int = 3
    shutdown_grace_s: float = 30.0
    # Completions wait at most this long to share one statement.
    complete_flush_ms: int = 2
    metrics_host: str = "0.0.0.0"
    # 0 picks a free port (logged at start); -1 serves no endpoint.
    metrics_port: int = 9100
    # The database connections this process may open.
    db_pool_size: int = 20
    once: bool = False

    @classmethod
    def from_env(cls, kinds: tuple[str, ...], **overrides: Any) -> WorkerSettings:
        env = environ.Env()
        defaults = cls(kinds=kinds)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name in ("kinds", "once"):
                continue
            default = getattr(defaults, field.name)
            name = f"WORKER_{field.name.upper()}"
            raw = env.str(name, default="")
            if raw == "":
                # capacity stays unset, so it follows the pool size this environment gives
                values[field.name] = None if field.name == "capacity" else default
                continue
            try:
                values[field.name] = (int if field.name == "capacity" else type(default))(raw)
            except ValueError:
                raise ImproperlyConfigured(
                    f"{name}={raw!r} is not a valid {type(default).__name__}"
                ) from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = cls(kinds=kinds, **values)
        settings.validate()
        return settings

    def __post_init__(self) -> None:
        if self.capacity is None:
            default = self.db_pool_size - OWN_CONNECTIONS if self.needs_threads else 100
            object.__setattr__(self, "capacity", max(default, 1))

    @property
    def needs_threads(self) -> bool:
        """Whether any handled kind runs a sync handler (a thread and a connection per item)."""
        handlers = [handler_for(kind) for kind in self.kinds]
        return any(h is not None and not is_async(h) for h in handlers)

    def validate(self) -> None:
        """One clear message per wrong setting, naming what to change."""
        problems = []
        for kind in self.kinds:
            if kind not in known_kinds():
                problems.append(f"unknown kind {kind!r} (known: {', '.join(known_kinds())})")
            elif handler_for(kind) is None:
                problems.append(
                    f"no worker handles {kind!r} (handled: {', '.join(handled_kinds())})"
                )
        if self.capacity < 1:
            problems.append(f"capacity must be at least 1 (got {self.capacity})")
        if self.lease_s < 1:
            problems.append(f"WORKER_LEASE_S must be at least 1 (got {self.lease_s})")
        if not 0 < self.renew_timeout_s <= self.lease_s / 3:
            problems.append(
                f"WORKER_RENEW_TIMEOUT_S must be above 0 and at most a third of the lease "
                f"({self.lease_s / 3:g}); got {self.renew_timeout_s}"
            )
        for name in ("poll_interval_ms", "heartbeat_interval_s", "claim_batch"):
            if getattr(self, name) <= 0:
                problems.append(f"WORKER_{name.upper()} must be above 0")
        if self.shutdown_grace_s < 0 or self.complete_flush_ms < 0:
            problems.append("WORKER_SHUTDOWN_GRACE_S and WORKER_COMPLETE_FLUSH_MS must be >= 0")
        if not problems and self.needs_threads:
            needed = self.capacity + OWN_CONNECTIONS
            if needed > self.db_pool_size:
                problems.append(
                    f"capacity {self.capacity} runs sync handlers, one database connection each, "
                    f"plus {OWN_CONNECTIONS} of the worker's own: {needed} connections, but "
                    f"WORKER_DB_POOL_SIZE is {self.db_pool_size}; lower --capacity to "
                    f"{self.db_pool_size - OWN_CONNECTIONS} or raise WORKER_DB_POOL_SIZE"
                )
        if problems:
            raise ImproperlyConfigured("; ".join(problems))
