"""The product's settings: one ``WORKQUEUE = {...}`` dict in the site's settings, every default
here, read everywhere through ``wq_settings``.

A site writes only what it changes (``WORKQUEUE = {"LANES": ["default", "emails"]}``); every
other name keeps the default below. A name this module does not know, or a value of the wrong
type or out of range, is refused in one line naming the setting and what to change, when the
settings are first read (``manage.py check`` reads them). ``wq_settings`` follows Django's
``setting_changed`` signal, so tests change it with ``override_settings(WORKQUEUE=...)``.

Units are in the names (``_S`` seconds, ``_MS`` milliseconds, ``_BYTES``). The reference site
(``project/settings.py``) fills the dict from the environment; a site of its own writes it.
"""

from __future__ import annotations

import difflib
import threading
import uuid
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import pydantic
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import connections
from pydantic import Field
from pydantic_core import PydanticCustomError

DAY_S = 86_400


def _port(value: int | None) -> int | None:
    if value is not None and not -1 <= value <= 65535:
        raise PydanticCustomError(
            "port", "must be a port (1-65535), 0 for any free port or -1 for none"
        )
    return value


# The most spans of history the retention may keep (wqcore.conf.Settings._history_spans).
MAX_HISTORY_SPANS = 60


class Settings(pydantic.BaseModel):
    """Every setting, its default, and what it is for (``runworker --help`` and ``sweep --help``
    print these descriptions with the values in effect)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    # -- tenancy and databases ------------------------------------------------------------------
    TENANCY: str = Field(
        "single",
        description="who the tenants are: 'single' (one implicit tenant), 'orgs' (the tenancy "
        "app's orgs and memberships), or the dotted path of a callable giving a request's tenant",
    )
    DATABASE_ALIAS: str = Field(
        "default", description="the everyday login's alias: row-level security applies to it"
    )
    SYSTEM_DATABASE_ALIAS: str | None = Field(
        None,
        description="the alias of the tenant-less operations (claim, sweep, gauges, relay). "
        "None: 'system' when DATABASES has it, else DATABASE_ALIAS",
    )
    OWNER_DATABASE_ALIAS: str | None = Field(
        None,
        description="the alias of the login that owns the tables and grants the others their "
        "rights. None: 'admin' when DATABASES has it, else DATABASE_ALIAS",
    )
    LISTEN_DATABASE_ALIAS: str | None = Field(
        None,
        description="the alias the workers LISTEN on, reaching PostgreSQL itself (a transaction "
        "pooler cannot LISTEN). None: DATABASE_ALIAS, or no LISTEN behind POOLER='transaction'",
    )
    POOLER: Literal["none", "transaction"] = Field(
        "none",
        description="'transaction' when the aliases reach PostgreSQL through a transaction "
        "pooler (PgBouncer pool_mode = transaction): nothing is prepared on the server",
    )
    DB_KEEPALIVES_IDLE_S: int = Field(
        5,
        ge=1,
        le=7200,
        description="a connection idle this long is probed (libpq's keepalives_idle, on every "
        "connection the product opens): a database host that vanished without refusing (a cut "
        "network, a frozen VM) is noticed after this plus DB_KEEPALIVES_INTERVAL_S times "
        "DB_KEEPALIVES_COUNT (11 s by default), instead of TCP's hours",
    )
    DB_KEEPALIVES_INTERVAL_S: int = Field(
        2, ge=1, le=600, description="then probed this often (libpq's keepalives_interval)"
    )
    DB_KEEPALIVES_COUNT: int = Field(
        3,
        ge=1,
        le=100,
        description="and ended after this many unanswered probes (libpq's keepalives_count)",
    )
    DB_TCP_USER_TIMEOUT_MS: int = Field(
        10_000,
        ge=0,
        le=3_600_000,
        description="a connection whose sent data goes unacknowledged this long is ended "
        "(libpq's tcp_user_timeout: a statement sent to a host that vanished fails, rather than "
        "waiting out TCP's retransmissions, about 15 minutes; 0: the system's)",
    )
    TENANT_NAMING: Literal["set_config", "set_local"] = Field(
        "set_config",
        description="how a transaction names its tenant for row-level security. 'set_config': "
        "set_config() in the same round trip as the statement, or inside it (one server). "
        "'set_local': SET LOCAL as a statement of its own, which Citus sends on to its workers "
        "(with the logins' citus.propagate_set_commands = 'local', which create_logins sets)",
    )
    CITUS: bool = Field(
        False,
        description="the queue's tables are distributed on Citus (manage.py citus_distribute): "
        "the statements Citus cannot run as written are sent in their Citus form (the enqueue: "
        "no history probe, its ready row a second statement on the tenant's node; the claim: "
        "tenants read on the coordinator, then a claim within each routed to its node). Needs "
        "TENANT_NAMING = 'set_local' and HISTORY = False (the startup check says so)",
    )

    # -- kinds, lanes, payloads -----------------------------------------------------------------
    AUTODISCOVER_MODULE: str = Field(
        "work", description="the module of every installed app that declares kinds and handlers"
    )
    HANDLER_MODULES: list[str] = Field(
        default_factory=list,
        description="more modules that declare kinds and handlers, outside any installed app",
    )
    LANES: list[str] = Field(
        default_factory=lambda: ["default"],
        description="lanes besides the kinds' own: the only lanes the API accepts and /metrics "
        "names",
    )
    MAX_PAYLOAD_BYTES: int = Field(256 * 1024, ge=1, description="the largest payload, as JSON")
    KIND_TIMEOUT_S: float = Field(
        3600.0,
        ge=0,
        le=7 * DAY_S,
        description="the longest a handler runs, for every kind that declares no timeout of "
        "its own: past it, it is cancelled and its item fails as TimeoutError (0: no limit)",
    )

    # -- the claim --------------------------------------------------------------------------------
    CLAIM_DURABLE: bool = Field(
        True, description="a claim commits durably before any handler runs (false: faster)"
    )
    FAIR_CLAIM: bool = Field(
        True, description="a claim shares a lane round-robin between tenants (false: oldest first)"
    )
    MAX_IN_FLIGHT: int | None = Field(
        None, ge=1, description="a tenant's items a lane runs at once, when its share sets none"
    )
    LANE_CAPS: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict,
        description="the most items of each named lane claimed at once across every worker and "
        "tenant ({'lane': n}; a lane not named: no cap). A kind caps itself with Kind.max_running",
    )

    # -- gauges and the API -----------------------------------------------------------------------
    GAUGES_CACHE_S: float = Field(
        5.0, ge=0, description="the gauges' endpoint (/metrics/queue) reads them this seldom"
    )
    GAUGES_WORKER_STALE_AFTER_S: float = Field(
        30.0, gt=0, description="a worker whose heartbeat is older is not counted live"
    )
    IDEMPOTENCY_KEY_RETENTION_S: int = Field(
        DAY_S, ge=0, description="how long the API keeps its answer to an Idempotency-Key"
    )

    # -- triage (the admin's dead letters, manage.py queue requeue/discard) ----------------------
    TRIAGE_SEARCH_WINDOW_S: float = Field(
        7 * DAY_S,
        gt=0,
        description="a search in error text without a 'failed since' looks at the dead letters "
        "of this last while only (it reads them by when they failed, never the whole table)",
    )
    TRIAGE_BATCH: int = Field(
        500,
        ge=1,
        le=10_000,
        description="the most items one statement of a triage by filter changes",
    )
    TRIAGE_MAX_BATCHES: int = Field(
        40,
        ge=1,
        description="the most statements one triage by filter runs per request (the admin; "
        "its page resumes the rest, fenced on the same moment) or per round (the command)",
    )
    VIEWER_GROUP: str = Field(
        "Queue viewers (read only)",
        max_length=150,
        description="the group whose staff (not superusers) read every page of the queue's "
        "admin across tenants and act on nothing; made after every migrate if it is not there "
        "(name an existing group to use it); empty: no viewers, and no group is made",
    )
    TRACE_URL_TEMPLATE: str = Field(
        "",
        description="a trace's page in the tracing UI, with {trace_id} where its 32 hex digits "
        "go (Jaeger: 'http://jaeger:16686/trace/{trace_id}'); empty: trace ids are not linked",
    )

    # -- logs -----------------------------------------------------------------------------------
    LOG_FORMAT: Literal["text", "json"] = Field(
        "text",
        description="how the queue's log formatter (wqcore.logs.formatter) writes each line: "
        "'text' (event k=\"v\") or 'json' (one object a line)",
    )

    # -- workers (manage.py runworker; its options override these) -----------------------------
    WORKER_LANE: str = Field("default", description="the lane a worker claims from (--lane)")
    WORKER_CAPACITY: int | None = Field(
        None,
        ge=1,
        description="items run at once (--capacity). None: two claim batches (200) for async "
        "handlers, one (100) when they run in threads (Django @task); for sync ones, what "
        "WORKER_DB_POOL_SIZE leaves after the worker's own connections",
    )
    WORKER_CLAIM_BATCH: int = Field(100, ge=1, description="the most items one claim takes")
    WORKER_LEASE_S: float = Field(30.0, ge=1, description="how long a claim holds an item")
    WORKER_RENEW_TIMEOUT_S: float | None = Field(
        None, gt=0, description="bounds each lease renewal. None: 5, or a third of the lease"
    )
    WORKER_LOOP_BLOCKED_WARN_S: float = Field(
        1.0,
        ge=0,
        description="warn when a handler blocks the worker's event loop this long (0: never)",
    )
    WORKER_POLL_INTERVAL_MS: int = Field(
        1000, ge=1, description="the poll when no work_available notice arrives"
    )
    WORKER_OUTAGE_BACKOFF_MAX_S: float = Field(
        10.0, gt=0, description="the longest pause between claims while the database is away"
    )
    WORKER_HEARTBEAT_INTERVAL_S: float = Field(5.0, gt=0, description="between heartbeats")
    WORKER_STALE_AFTER_BEATS: int = Field(
        3, ge=1, description="/healthz answers 503 once the heartbeat is this many intervals old"
    )
    WORKER_SHUTDOWN_GRACE_S: float = Field(
        30.0, ge=0, description="how long a stopping worker lets running items finish"
    )
    WORKER_COMPLETE_FLUSH_MS: int = Field(
        2, ge=0, description="completions wait at most this long to share one statement"
    )
    WORKER_PROGRESS_FLUSH_S: float = Field(
        1.0,
        ge=0.05,
        le=3600,
        description="a running item's progress and metadata (run.progress, run.set_meta) are "
        "written at most this often (its last report also before its outcome)",
    )
    WORKER_METRICS_HOST: str = Field(
        "127.0.0.1",
        description="where /healthz and /metrics listen: this host only by default (they answer "
        "anyone who reaches them); '0.0.0.0' where a scraper or a probe comes from outside (a "
        "container)",
    )
    WORKER_METRICS_PORT: Annotated[int | None, pydantic.AfterValidator(_port)] = Field(
        None,
        description="/healthz and /metrics (--metrics-port). None: 9100, or the next free port; "
        "0: any free port; -1: none",
    )
    WORKER_DB_POOL_SIZE: int = Field(
        20,
        ge=1,
        description="the database connections a worker process may open: its own (the three "
        "pools below, LISTEN, the heartbeat, the relay and the sweep, the lease keeper: the "
        "count is under these settings) and one per handler thread",
    )
    WORKER_TENANT_POOL_SIZE: int = Field(
        2,
        ge=1,
        le=100,
        description="the worker's pool on the everyday login: retries, dead letters, hand-backs "
        "and an async handler's enqueues, each under its item's tenant",
    )
    WORKER_SYSTEM_POOL_SIZE: int = Field(
        2,
        ge=1,
        le=100,
        description="the worker's pool on the system login: the batch completions and the "
        "other tenant-less steps",
    )
    WORKER_CLAIM_POOL_SIZE: int = Field(
        2,
        ge=1,
        le=100,
        description="the worker's pool of claims on the system login (two claims at once while "
        "a backlog drains)",
    )
    WORKER_SWEEP: bool = Field(True, description="each worker runs the sweep too")
    RUN_ON_COMMIT: bool = Field(
        False,
        description="for development only, refused unless DEBUG: a process that enqueues (the "
        "web, manage.py shell, a command) runs each committed enqueue's lane itself, once its "
        "transaction commits, through a worker's claim, fencing token, lease and settle "
        "(workers.eager); rolled-back work never runs, and workers and the sweep never do this",
    )
    WORKER_LIVENESS_LOCK: bool = Field(
        True,
        description="a worker holds a liveness lock (a session-level advisory lock on a "
        "connection of its own, on the system login) from before its first claim, so the sweep "
        "hands back a dead worker's items within about SWEEP_RESCUE_GRACE_S of its death "
        "instead of after their lease (false, or behind POOLER='transaction': the lease only)",
    )
    WORKER_LIVENESS_CHECK_S: float = Field(
        0.25,
        gt=0,
        le=10,
        description="how often a worker checks its liveness connection; one that fails (or does "
        "not answer within SWEEP_RESCUE_GRACE_S less this) fences the worker: its handlers are "
        "cancelled and its leases no longer renewed, and it claims again once it holds a new "
        "lock",
    )

    # -- the ready ring (workqueue/ready.py: every worker turns it, one at a time) ---------------
    READY_ROTATE_S: float = Field(
        1.0,
        gt=0,
        le=60,
        description="how often each worker offers to turn the ready ring (one does at a time): "
        "it promotes the items coming due, and empties a slot the claims have walked past, so a "
        "claim never walks what a long-open snapshot keeps",
    )
    READY_COMPACT_MIN_BYTES: int = Field(
        256 * 1024,
        ge=0,
        description="a slot of the ring is emptied once its file has grown to this (a smaller one "
        "costs a claim less than emptying it costs the catalog)",
    )
    READY_COMPACT_MAX_ROWS: int = Field(
        20_000,
        ge=0,
        description="a slot still holding more pending items than this is a backlog, left as it "
        "is until the claims have drained it below (emptying it would rewrite the backlog), or "
        "until they have left more dead rows in it than it still holds",
    )
    READY_BATCH: int = Field(
        10_000,
        ge=1,
        description="the most items one turn of the ring promotes from its later slot, or gives "
        "a ready row to (items a release before the ring made pending)",
    )
    READY_LOCK_TIMEOUT_MS: int = Field(
        50,
        ge=1,
        le=10_000,
        description="how long a turn waits for a slot's lock (held by a long report on it, a "
        "pg_dump) before leaving the slot for the next turn; claims of that slot wait as long",
    )

    # -- the sweep (in each runworker unless WORKER_SWEEP is false, or manage.py sweep) --------
    SWEEP_INTERVAL_S: float = Field(
        5.0, gt=0, description="between the end of one pass and the next"
    )
    SWEEP_TIMEOUT_S: float = Field(120.0, gt=0, description="a longer pass is abandoned")
    SWEEP_RESCUE_INTERVAL_S: float = Field(
        0.5,
        ge=0,
        le=60,
        description="between the rescue's own passes (it hands back the items of workers whose "
        "liveness lock no session holds), besides its step in each sweep pass (0: only there)",
    )
    SWEEP_RESCUE_GRACE_S: float = Field(
        1.0,
        gt=0,
        le=600,
        description="a worker's liveness lock is seen free twice at least this far apart before "
        "its items are handed back (a live worker that lost its liveness connection has fenced "
        "itself by then); at least twice WORKER_LIVENESS_CHECK_S",
    )
    SWEEP_BATCH: int = Field(
        1000, ge=1, description="the most rows one statement of a step touches"
    )
    SWEEP_MAX_BATCHES: int = Field(
        20,
        ge=1,
        description="the most statements per step and pass (the move to history goes on in "
        "rounds of this many while they come back full, for at most SWEEP_INTERVAL_S)",
    )
    ITEM_RETENTION_S: float = Field(7 * DAY_S, ge=0, description="done items are purged after this")
    HISTORY: bool = Field(
        True,
        description="the sweep moves done items out of the hot table into history tables, one "
        "per HISTORY_SPAN_S, dropped whole after ITEM_RETENTION_S (off: done items stay in the "
        "item table until the purge deletes them)",
    )
    HISTORY_AFTER_S: float = Field(
        60.0, ge=0, description="a done item stays in the hot table this long before it moves"
    )
    HISTORY_SPAN_S: float = Field(
        DAY_S,
        ge=60,
        description="each history table holds the items that ended within this span; a reader "
        "by id looks in each one, so keep ITEM_RETENTION_S / HISTORY_SPAN_S small (a dozen)",
    )
    DEAD_LETTER_RETENTION_S: float = Field(
        30 * DAY_S,
        ge=0,
        description="dead letters, discarded and cancelled items are purged after this",
    )
    OUTBOX_RETENTION_S: float = Field(DAY_S, ge=0, description="relayed outbox rows, after this")
    ROLLUP_RETENTION_S: float = Field(
        2 * DAY_S,
        ge=3600,
        description="the gauges page's minutes (the sweep's rollup of the attempts, which its "
        "charts draw: a day at most) are purged after this",
    )
    ROLLUP_BATCH: int = Field(
        50_000,
        ge=1,
        le=1_000_000,
        description="the most attempts one statement of the sweep's rollup counts (it runs at "
        "most SWEEP_MAX_BATCHES of them a pass, so this bounds the attempts a second it keeps "
        "up with)",
    )
    SWEEP_PURGE_SESSIONS: bool = Field(
        False,
        description="the sweep purges expired Django sessions too, in bounded batches (the "
        "site's own table: only when the site asks)",
    )
    SCHEDULE_TENANT: uuid.UUID | None = Field(
        None,
        description="the tenant a site schedule (tenant=None) enqueues for. None: the single "
        "tenancy's one tenant; under any other tenancy a site schedule then refuses to start",
    )

    @pydantic.model_validator(mode="after")
    def _rescue_grace(self) -> Settings:
        # A live worker whose liveness connection fails fences itself within its check interval
        # and the check's own timeout (the grace less one interval): well inside the grace.
        if self.SWEEP_RESCUE_GRACE_S < 2 * self.WORKER_LIVENESS_CHECK_S:
            raise PydanticCustomError(
                "rescue_grace",
                "SWEEP_RESCUE_GRACE_S ({grace}) must be at least twice WORKER_LIVENESS_CHECK_S "
                "({check}): raise the grace or check more often",
                {"grace": self.SWEEP_RESCUE_GRACE_S, "check": self.WORKER_LIVENESS_CHECK_S},
            )
        return self

    @pydantic.model_validator(mode="after")
    def _history_spans(self) -> Settings:
        # A reader by id probes each span's table, and each span is three tables: a few dozen
        # spans, not thousands.
        spans = self.ITEM_RETENTION_S / self.HISTORY_SPAN_S
        if self.HISTORY and spans > MAX_HISTORY_SPANS:
            raise PydanticCustomError(
                "history_spans",
                "ITEM_RETENTION_S / HISTORY_SPAN_S ({spans}) must be at most {most}: widen "
                "HISTORY_SPAN_S (e.g. to ITEM_RETENTION_S / 7)",
                {"spans": round(spans), "most": MAX_HISTORY_SPANS},
            )
        return self

    @pydantic.field_validator("TRACE_URL_TEMPLATE")
    @classmethod
    def _trace_url(cls, value: str) -> str:
        if value and "{trace_id}" not in value:
            raise ValueError("must contain {trace_id} where the trace's id goes (or be empty)")
        if value and not value.startswith(("http://", "https://", "/")):
            raise ValueError("must be an http(s) URL or a path")
        return value


NAMES = tuple(Settings.model_fields)


def describe(name: str) -> str:
    return Settings.model_fields[name].description or ""


def load(values: dict[str, Any] | None) -> Settings:
    """``WORKQUEUE`` as ``Settings``, or one ``ImproperlyConfigured`` line naming every setting
    to change."""
    values = dict(values or {})
    problems = []
    for name in values:
        if name not in Settings.model_fields:
            near = difflib.get_close_matches(name, NAMES, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            problems.append(f"WORKQUEUE[{name!r}]: no such setting{hint}")
    if problems:
        raise ImproperlyConfigured("; ".join(problems))
    return _checked(values, {})


def with_values(values: dict[str, Any], labels: dict[str, str]) -> Settings:
    """The settings in effect with ``values`` in their place, each checked by its own definition
    above: one ``ImproperlyConfigured`` line naming every wrong one, as ``labels`` name it (the
    command line's option that gave it), else as ``WORKQUEUE[...]``."""
    return _checked({**wq_settings.get().model_dump(), **values}, labels)


def _checked(values: dict[str, Any], labels: dict[str, str]) -> Settings:
    try:
        return Settings(**values)
    except pydantic.ValidationError as exc:
        problems = []
        for error in exc.errors():
            if not error["loc"]:  # a rule between settings: its message names them
                problems.append(f"WORKQUEUE: {error['msg']}")
                continue
            name = ".".join(map(str, error["loc"]))
            label = labels.get(name) or f"WORKQUEUE[{name!r}]"
            problems.append(f"{label}: {error['msg']} (got {error['input']!r})")
        raise ImproperlyConfigured("; ".join(problems)) from None


class _Lazy:
    """``WORKQUEUE`` read on first use (not at import: settings may not be configured yet),
    and again after ``override_settings``."""

    def __init__(self) -> None:
        self._value: Settings | None = None
        self._lock = threading.Lock()

    def get(self) -> Settings:
        value = self._value
        if value is None:
            with self._lock:
                if self._value is None:
                    self._value = load(getattr(settings, "WORKQUEUE", None))
                value = self._value
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)

    def reload(self) -> None:
        self._value = None


if TYPE_CHECKING:

    class _LazySettings(Settings):
        """What ``wq_settings`` answers: each setting, typed, and the proxy's own two methods."""

        def get(self) -> Settings: ...
        def reload(self) -> None: ...


# A cast the proxy keeps true: every attribute but ``get`` and ``reload`` is read from the
# loaded Settings (``_Lazy.__getattr__``).
wq_settings = cast("_LazySettings", _Lazy())


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting in ("WORKQUEUE", "DATABASES"):
        wq_settings.reload()


setting_changed.connect(_reload, dispatch_uid="wqcore.conf.reload")


# What every login's sessions start with, set on the login (``ALTER ROLE ... SET``), never sent
# at connect (a pooler refuses startup options): no JIT (over a million waiting items,
# PostgreSQL spent nearly all of a fair claim compiling it; a queue's statements are short,
# none gains), and UTC (what Django's connections use).
LOGIN_SETTINGS = (("jit", "off"), ("timezone", "UTC"))

# The settings that become libpq's options on every connection the product opens.
_CONNECTION_SETTINGS = {
    "keepalives_idle": "DB_KEEPALIVES_IDLE_S",
    "keepalives_interval": "DB_KEEPALIVES_INTERVAL_S",
    "keepalives_count": "DB_KEEPALIVES_COUNT",
    "tcp_user_timeout": "DB_TCP_USER_TIMEOUT_MS",
}


def connection_options(values: dict[str, Any] | None = None) -> dict[str, int]:
    """libpq's keepalives and user timeout (``DB_KEEPALIVES_*``, ``DB_TCP_USER_TIMEOUT_MS``)
    for a connection: those in effect, or those of a ``WORKQUEUE`` dict not yet loaded (a
    site's settings module filling its ``DATABASES``: the rest of it is not read, and a wrong
    one is one ``ImproperlyConfigured`` line). Each is the client's side, sent in no startup
    packet (a pooler accepts them), and ignored on a Unix-domain socket."""
    if values is None:
        chosen: Settings = wq_settings.get()
    else:
        chosen = load({k: values[k] for k in _CONNECTION_SETTINGS.values() if k in values})
    return {"keepalives": 1} | {
        option: int(getattr(chosen, name)) for option, name in _CONNECTION_SETTINGS.items()
    }


# The defaults, for a connection made before any settings are read.
CONNECTION_OPTIONS = connection_options({})

# The server's settings for its own end of a session's socket, by libpq's name for the same
# bound on the client's end.
_SERVER_SOCKET_SETTINGS = {
    "keepalives_idle": "tcp_keepalives_idle",
    "keepalives_interval": "tcp_keepalives_interval",
    "keepalives_count": "tcp_keepalives_count",
    "tcp_user_timeout": "tcp_user_timeout",
}


def server_socket_settings() -> tuple[list[str], list[str]]:
    """The server's keepalives and user timeout for its end of a session, the same bounds as
    the client's (``connection_options``), as names and values for ``set_config``. A session
    that holds a lock for the fleet (a worker's liveness lock, the sweep's mutex) sets them so
    that when its client's host vanishes the server ends it within those bounds and the lock
    is free, instead of after the server's defaults (hours, where the kernel's keepalives are
    left as they are). Ignored on a Unix-domain socket."""
    options = connection_options()
    names = list(_SERVER_SOCKET_SETTINGS.values())
    return names, [str(options[option]) for option in _SERVER_SOCKET_SETTINGS]


def libpq_params(alias: str) -> dict[str, Any]:
    """psycopg's parameters for a connection the product makes itself on ``alias`` (a pool's,
    LISTEN, a lock's): the alias's own, Django's keys left out, and the keepalives and user
    timeout in effect unless the alias's OPTIONS set their own."""
    params = {**connection_options(), **connections[alias].get_connection_params()}
    for django_only in ("cursor_factory", "context", "server_side_binding"):
        params.pop(django_only, None)
    return params


# -- the aliases ----------------------------------------------------------------------------------


def tenant_alias() -> str:
    """The everyday login's alias (row-level security applies to it)."""
    return str(wq_settings.DATABASE_ALIAS)


def system_alias() -> str:
    """The alias of the tenant-less operations: ``SYSTEM_DATABASE_ALIAS``, else ``system``
    when DATABASES has it, else the everyday alias (one login for everything)."""
    return _alias(wq_settings.SYSTEM_DATABASE_ALIAS, "system")


def owner_alias() -> str:
    """The alias of the login that owns the product's tables (migrations, grants)."""
    return _alias(wq_settings.OWNER_DATABASE_ALIAS, "admin")


def listen_alias() -> str | None:
    """Where workers LISTEN, or None: behind a transaction pooler without a direct alias
    (LISTEN needs a session of its own; the poll and the sweep find the work then)."""
    given = wq_settings.LISTEN_DATABASE_ALIAS
    if given:
        return str(given)
    return None if wq_settings.POOLER == "transaction" else tenant_alias()


def _alias(given: str | None, conventional: str) -> str:
    if given:
        return given
    return conventional if conventional in settings.DATABASES else tenant_alias()


def effective(prefixes: tuple[str, ...]) -> str:
    """The settings whose names start with ``prefixes``, each with its value in effect and what
    it is for (for ``--help``); the one-line problem instead when the settings are wrong."""
    try:
        values = wq_settings.get()
    except ImproperlyConfigured as exc:
        return f"the settings in effect cannot be read: {exc}"
    lines = []
    for name in NAMES:
        if name.startswith(prefixes):
            lines.append(f"  {name} = {getattr(values, name)!r}\n      {describe(name)}")
    return "\n".join(lines)
