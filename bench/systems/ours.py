"""Bench adapter for the product (run with the repository's .venv; see README.md here).

The database the harness hands over is reached as the owner; the product's own two logins
(created by ``create_logins``) are pointed at it, so every figure is measured through the same
row-level security, grants and statements as production.

Configs: ``default`` runs ``manage.py runworker BENCH_NOOP`` subprocesses with the shipped
defaults (what users start: sweep, relayer, heartbeat and metrics endpoint included);
``batched`` the same with a larger capacity and claim batch; ``inprocess`` the worker class in
the adapter's own process (``--once``), as the first benchmarks measured it; ``async_claim``
the shipped defaults with the claim committed asynchronously (``WORKQUEUE_CLAIM_DURABLE=false``),
which ``bench/claim_commit.py`` sets beside ``default``; ``fairness_off`` claims oldest first
across tenants (``WORKQUEUE_FAIR_CLAIM=false``: the fairness workload's control, and the depth
workload's claim without fairness's cost); ``pooler_safe`` the shipped defaults with
``DATABASE_POOLER=transaction`` (no prepared statements) on direct connections; the claim's
controls, for the depth workload (``bench/controls.py`` sets them side by side): ``keyed`` gives
every waiting item a concurrency key (1,000 keys, so each has depth / 1,000 waiting),
``one_key_held`` gives them all one key while another item of it is claimed (the claim finds
nothing, walking past the key's backlog), ``lane_capped`` caps the lane
(``WORKQUEUE_LANE_CAPS=default=1000``), ``kind_capped`` claims a kind capped by its own
``max_running``, ``keyed_capped`` both keys and the lane cap; ``paused_other`` claims with
another kind of the lane paused (LISTEN at
``DATABASE_DIRECT_URL``, the same server), and
``pgbouncer`` the same through a PgBouncer (Debian's, ``pool_mode = transaction``, its default
pool of 20) that the adapter starts in front of the database, LISTEN direct
(``DATABASE_DIRECT_URL``); ``bench/pooler.py`` sets the three side by side. For a drain, the
workers start with the items held back (``available_at`` an hour ahead), and the clock starts
when one statement makes them due, so process start-up stays out of the timing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]

import _common as common  # noqa: E402

KIND = "BENCH_NOOP"
CONFIGS = [
    "default",
    "keyed",
    "one_key_held",
    "lane_capped",
    "kind_capped",
    "keyed_capped",
    "paused_other",
    "batched",
    "inprocess",
    "fairness_off",
    "async_claim",
    "pooler_safe",
    "pgbouncer",
]
# default: the shipped defaults (capacity 200, two claim batches, for an async handler; claim
# batch 100).
# batched: a larger capacity and claim batch, what a no-op firehose would be tuned to.
SETTINGS = {
    "default": {},
    "keyed": {},
    "one_key_held": {},
    "lane_capped": {},
    "kind_capped": {},
    "keyed_capped": {},
    "paused_other": {},
    "batched": {"capacity": 400, "claim_batch": 200, "complete_flush_ms": 5},
    "inprocess": {},
    "fairness_off": {},
    "async_claim": {},
    "pooler_safe": {},
    "pgbouncer": {},
}
RUNWORKER_CONFIGS = (
    "default",
    "batched",
    "fairness_off",
    "async_claim",
    "pooler_safe",
    "pgbouncer",
)
# Settings a config sets outside WORKER_*: fairness_off claims oldest first across tenants;
# async_claim commits the claim asynchronously (the trade bench/claim_commit.py measures
# against the durable default).
CONFIG_ENV = {
    "fairness_off": {"WORKQUEUE_FAIR_CLAIM": "false"},
    "async_claim": {"WORKQUEUE_CLAIM_DURABLE": "false"},
    "pooler_safe": {"DATABASE_POOLER": "transaction"},
    "pgbouncer": {"DATABASE_POOLER": "transaction"},
    "lane_capped": {"WORKQUEUE_LANE_CAPS": "default=1000"},
    "keyed_capped": {"WORKQUEUE_LANE_CAPS": "default=1000"},
}
# The depth workload's controls: how many distinct concurrency keys its items carry (0: none).
KEYS = {"keyed": 1000, "keyed_capped": 1000, "one_key_held": 1}
# PgBouncer's own default server pool per login (the pgbouncer config).
PGBOUNCER_POOL_SIZE = 20


def _as(dsn: str, user: str) -> str:
    parts = urlsplit(dsn)
    host = parts.hostname or ""
    netloc = f"{user}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _through_pgbouncer(dsn: str) -> dict[str, str]:
    """Start a PgBouncer in front of ``dsn``'s server (stopped when this process exits); the
    logins' URLs through it, the everyday login's direct URL for LISTEN."""
    import atexit

    from project.database import parse
    from tests import pgbouncer

    server = parse("--dsn", dsn)
    bouncer = pgbouncer.start(
        server["HOST"],
        server["PORT"],
        {"workqueue_app": None, "workqueue_system": None},
        pool_size=PGBOUNCER_POOL_SIZE,
    )
    atexit.register(bouncer.stop)
    return {
        "DATABASE_URL": bouncer.url("workqueue_app", server["NAME"]),
        "SYSTEM_DATABASE_URL": bouncer.url("workqueue_system", server["NAME"]),
        "DATABASE_DIRECT_URL": _as(dsn, "workqueue_app"),
    }


def fresh_database(database_url: str | None, name: str) -> str:
    """A fresh database ``name`` on the server of ``database_url`` (an owner URL), or on the
    embedded server in ``.pgdata/`` when none is given; its URL. For the bench/ scripts run
    with the repository's .venv."""
    import _pg

    if not database_url:
        from project.database import embedded_urls
        from project.embedded import default_pgdata

        database_url = _pg.database_url(embedded_urls(default_pgdata()).admin, "postgres")
    return _pg.fresh_database(database_url, name)


def setup_django(dsn: str, config: str = "default") -> None:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        ADMIN_DATABASE_URL=dsn,
        DATABASE_URL=_as(dsn, "workqueue_app"),
        SYSTEM_DATABASE_URL=_as(dsn, "workqueue_system"),
        DEBUG="false",
        # With DEBUG off the reference site refuses its built-in key: a throwaway one per run.
        SECRET_KEY=os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        LOG_LEVEL="WARNING",
    )
    if config == "pgbouncer":
        os.environ.update(_through_pgbouncer(dsn))
    elif config == "pooler_safe":  # LISTEN as behind a pooler: at the direct URL
        os.environ["DATABASE_DIRECT_URL"] = _as(dsn, "workqueue_app")
    import django

    django.setup()
    logging.disable(logging.INFO)
    import ours_kinds  # noqa: F401  (registers BENCH_NOOP and its handler)


def prepare(dsn: str) -> Any:
    """Logins, schema, one tenant and its member; returns the member's context."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from tenancy.contexts import Role
    from tenancy.models import Membership, Org

    User = get_user_model()

    call_command("create_logins", verbosity=0, stdout=open(os.devnull, "w"))
    call_command("migrate", database="admin", verbosity=0)
    org = Org.objects.using("admin").create(name="Bench", slug=f"bench-{uuid.uuid4().hex[:8]}")
    user = User.objects.using("admin").create(username=f"bench-{uuid.uuid4().hex[:8]}")
    Membership.objects.using("admin").create(org=org, user=user, role=Role.MEMBER)
    return context(org.pk, user.pk)


def context(org_id: Any, user_id: Any) -> Any:
    from tenancy.contexts import AppType, OpContext, Role, new_request_context

    return OpContext(org_id, user_id, Role.MEMBER, new_request_context(AppType.CLI))


def load_context() -> Any:
    from tenancy.models import Membership

    member = Membership.objects.using("admin").get()
    return context(member.org_id, member.user_id)


def fill(
    ctx: Any,
    n: int,
    batch: int = 1000,
    held_back: bool = False,
    kind: str = KIND,
    keys: int = 0,
) -> None:
    """``n`` items through the bulk enqueue; ``held_back`` makes them due only in an hour;
    ``keys`` spreads them over that many concurrency keys."""
    from datetime import UTC, datetime, timedelta

    from workqueue.runtime import NewItem, enqueue_many

    when = datetime.now(UTC) + timedelta(hours=1) if held_back else None
    for start in range(0, n, batch):
        enqueue_many(
            ctx,
            [
                NewItem(
                    kind,
                    {"seq": i},
                    available_at=when,
                    concurrency_key=f"k{i % keys}" if keys else None,
                )
                for i in range(start, min(n, start + batch))
            ],
        )


def fill_sql(
    ctx: Any, n: int, payload: dict[str, Any] | None = None, kind: str = KIND, keys: int = 0
) -> None:
    """Clone one API-made row ``n - 1`` times in SQL (the API makes 1M rows too slowly), with
    time-ordered ids as the product makes them (UUIDv7 layout: version 7, a rising prefix);
    ``keys`` spreads them over that many concurrency keys."""
    from django.db import connections

    from workqueue.runtime import enqueue

    key = "k0" if keys else None
    seed, _ = enqueue(ctx, kind, payload or {"seq": 0}, concurrency_key=key)
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO workqueue_workitem (
                id, org_id, kind, lane, status, payload, idempotency_key, concurrency_key,
                priority, available_at, attempts, max_attempts, last_error, created_by,
                updated_by, created_at, updated_at)
            SELECT ('01900000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
                   org_id, kind, lane, status, payload, NULL,
                   CASE WHEN %s > 0 THEN 'k' || (g %% %s) END, priority,
                   available_at, attempts, max_attempts, last_error, created_by, updated_by,
                   created_at, updated_at
              FROM workqueue_workitem, generate_series(2, %s) AS g
             WHERE id = %s
            """,
            [keys, max(keys, 1), n, seed.id],
        )


def count(status: str) -> int:
    from workqueue.models import WorkItem

    return WorkItem.objects.using("admin").filter(status=status).count()


def settle(dsn: str) -> None:
    from django.db import connections

    connections.close_all()
    import _pg

    _pg.settle(dsn)


def worker_settings(config: str, once: bool) -> Any:
    from workers.config import WorkerSettings

    return WorkerSettings(
        kinds=(KIND,), metrics_port=-1, once=once, poll_interval_ms=1000, **SETTINGS[config]
    )


def runworker_env(config: str, **extra: str) -> dict[str, str]:
    """The environment of a ``manage.py runworker`` subprocess: the shipped defaults, plus the
    tuned settings of ``batched``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
    env.update(
        WORKER_HANDLER_MODULES="ours_kinds",
        PYTHONPATH=os.pathsep.join([str(HERE), str(ROOT)]),
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    env.update({f"WORKER_{k.upper()}": str(v) for k, v in SETTINGS[config].items()})
    env.update(CONFIG_ENV.get(config, {}))
    env.update(extra)
    return env


class RunWorkers:
    """``manage.py runworker`` subprocesses, started and waited for until they serve."""

    def __init__(self, config: str, procs: int, **env: str) -> None:
        import subprocess

        self.procs = [
            subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "runworker", KIND],
                cwd=ROOT,
                env=runworker_env(config, LOG_LEVEL="INFO", **env),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for _ in range(procs)
        ]
        self.lines: list[str] = []
        for proc in self.procs:  # "worker_started" is logged once the endpoint is up
            assert proc.stdout is not None
            for line in proc.stdout:
                if "worker_started" in line:
                    break
            else:
                raise RuntimeError(f"runworker exited (rc={proc.wait()}) before it started")
            # Keep reading what the worker logs: a pipe nobody reads fills up, and a worker
            # writing to a full pipe stops until someone does.
            threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()
        time.sleep(0.5)  # LISTEN is up

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def stop(self) -> None:
        import signal

        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except Exception:
                proc.kill()
        # What the workers logged, by event (the harness's log of this run shows it).
        events = Counter(
            next((word for word in line.split() if "=" not in word), "?") for line in self.lines
        )
        print(f"runworker log events: {dict(events.most_common(10))}", file=sys.stderr)
        if events["Traceback"]:  # a worker that died says why in the harness's log
            print("".join(self.lines[-60:]), file=sys.stderr)


def _left() -> bool:
    """Whether any item is not yet done, asked of the two partial indexes (pending, claimed):
    the poll runs every 10 ms beside the workers, so it looks for one row of each, never counts
    them (a count walks every waiting item's index entry, 20,000 of them at the start: on this
    2-core machine a good part of a core taken from the system measured), and never scans the
    heap (drain_runworker turns sequential scans off for the harness's connection)."""
    from django.db import connections

    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM workqueue_workitem WHERE status = 'pending')"
            " OR EXISTS (SELECT 1 FROM workqueue_workitem WHERE status = 'claimed')"
        )
        return bool(cursor.fetchone()[0])


def drain_runworker(config: str, procs: int, n: int) -> float:
    """Drain ``n`` held-back items with ``procs`` runworker processes: the clock starts when
    the statement that makes them due (and announces it) has committed, as a peer's starts with
    its items already waiting (that statement itself, 0.2 s for 20,000 items, is no part of a
    drain), and stops when none is left, polled every 10 ms (the figure's resolution)."""
    from django.db import connections

    from workqueue.runtime import bring_forward

    workers = RunWorkers(config, procs)
    try:
        with connections["admin"].cursor() as cursor:
            cursor.execute("SET enable_seqscan = off")  # the partial indexes, as in _left
            # Due now, their ready rows moved from the ring's later slot into this second's
            # (a bare UPDATE of the items would leave those an hour ahead: nothing to claim).
            made_due = bring_forward("default", [KIND])
            t0 = time.time()  # committed (autocommit): the items are due
            cursor.execute("SELECT pg_notify('work_available', 'default')")
        if made_due != n:
            raise RuntimeError(f"drain: {made_due} of {n} items made due")
        while _left():
            time.sleep(0.01)
            if time.time() - t0 > 600:
                raise RuntimeError("drain: not done in 10 minutes")
        t1 = time.time()
    finally:
        workers.stop()
        with connections["admin"].cursor() as cursor:
            cursor.execute("RESET enable_seqscan")
    done = count("done")
    if done != n:
        raise RuntimeError(f"drain: {done} of {n} items done")
    return n / (t1 - t0)


def drain(dsn: str, config: str, procs: int, n: int) -> float:
    if config in RUNWORKER_CONFIGS:
        return drain_runworker(config, procs, n)
    workers = common.Workers(__file__, ["drain", "--dsn", dsn, "--config", config], procs)
    try:
        workers.wait_ready()
        t0 = workers.go()
        t1 = max(workers.wait_done(timeout=600))
    finally:
        workers.stop()
    done = count("done")
    if done != n:
        raise RuntimeError(f"drain: {done} of {n} items done")
    return n / (t1 - t0)


def run_worker(argv: list[str]) -> None:
    args = common.worker_args(argv)
    setup_django(args.dsn)
    from workers.worker import Worker

    worker = Worker(worker_settings(args.config, once=args.kind == "drain"))
    if args.kind == "drain":
        common.worker_wait_for_go()
        asyncio.run(worker.run())
        common.worker_done()
        return

    # serve: run until SIGTERM (the harness's stop()), answering work as it comes
    async def serve() -> None:
        import signal

        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, worker.request_stop)
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(0.5)  # LISTEN is up
        print(common.READY, flush=True)
        await task

    asyncio.run(serve())


def main() -> None:
    if sys.argv[1:2] == ["_worker"]:
        run_worker(sys.argv[1:])
        return
    args = common.parse_args(
        "ours",
        ["drain", "wake", "enqueue", "depth", "bloat", "fairness"],
        configs=CONFIGS,
        config_workloads={
            "default": ["drain", "wake", "enqueue", "depth", "bloat", "fairness"],
            "batched": ["drain"],
            "inprocess": ["drain", "wake"],
            "fairness_off": ["fairness", "depth"],
            "keyed": ["depth"],
            "one_key_held": ["depth"],
            "lane_capped": ["depth"],
            "kind_capped": ["depth"],
            "keyed_capped": ["depth"],
            "paused_other": ["depth"],
            "async_claim": ["drain", "wake"],
            "pooler_safe": ["drain", "enqueue", "wake", "depth"],
            "pgbouncer": ["drain", "enqueue", "wake"],
        },
        notes={"raw": "raw system only"},
    )
    os.environ.update(CONFIG_ENV.get(args.config, {}))  # in-process claims too (depth)
    setup_django(args.dsn, args.config)
    ctx = prepare(args.dsn)
    extra = {"config": args.config, **SETTINGS[args.config], **CONFIG_ENV.get(args.config, {})}
    from workqueue import runtime

    if args.workload == "drain":
        fill(ctx, args.n, held_back=args.config in RUNWORKER_CONFIGS)
        settle(args.dsn)
        rate = drain(args.dsn, args.config, args.procs, args.n)
        common.emit(common.figure(f"drain_p{args.procs}", "items/s", rate, **extra))
    elif args.workload == "wake":
        wake(args, ctx, extra)
    elif args.workload == "enqueue":
        settle(args.dsn)  # the migrations settled before the timed part, as for every system
        started = time.perf_counter()
        for i in range(args.n):
            runtime.enqueue(ctx, KIND, {"seq": i})
        single = args.n / (time.perf_counter() - started)
        started = time.perf_counter()
        fill(ctx, args.bulk_n, args.batch)
        bulk = args.bulk_n / (time.perf_counter() - started)
        how = {"how": f"enqueue_many, {args.batch} per call", **extra}
        common.emit(
            [
                common.figure("enqueue_single", "items/s", single, **extra),
                common.figure("enqueue_bulk", "items/s", bulk, **how),
            ]
        )
    elif args.workload == "depth":
        depth(args, ctx, extra)
    elif args.workload == "bloat":
        bloat(args, ctx, extra)
    elif args.workload == "fairness":
        fairness(args, ctx, extra)


def wake(args: Any, ctx: Any, extra: dict[str, Any]) -> None:
    import tempfile

    import ours_kinds

    from workqueue import runtime

    path = Path(tempfile.mkstemp(prefix="wake-ours-")[1])
    # The worker records each step of its path beside the handler's start (ours_kinds.STEPS).
    env = {common.WAKE_ENV: str(path), "BENCH_STEPS": "1"}
    if args.config in RUNWORKER_CONFIGS:
        workers: Any = RunWorkers(args.config, 1, **env)
    else:
        workers = common.Workers(
            __file__, ["serve", "--dsn", args.dsn, "--config", args.config], 1, env=env
        )
    try:
        if args.config not in RUNWORKER_CONFIGS:
            workers.wait_ready()
        warmup, seqs = common.wake_seqs(args.n)
        sent: dict[int, float] = {}
        for seq in warmup + seqs:
            runtime.enqueue(ctx, KIND, {"seq": seq})
            if seq >= 0:
                sent[seq] = common.stamp()
            time.sleep(args.interval_ms / 1000)
        started = common.read_wake(path, set(seqs), timeout=60)
        steps = common.step_shares(sent, started, common.read_steps(path), ours_kinds.STEPS)
    finally:
        workers.stop()
        path.unlink(missing_ok=True)
    common.emit(common.wake_figures(sent, started, how="LISTEN work_available", **steps, **extra))


def _claim_complete_cycles(n: int, kind: str = KIND) -> tuple[list[float], list[float]]:
    from tenancy.contexts import AppType, new_request_context
    from workqueue.claim import claim
    from workqueue.settle import complete

    rctx = new_request_context(AppType.WORKER)
    claims, cycles = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        [(item_ctx, item)] = claim(rctx, "default", [kind], "bench", 30, 1)
        t1 = time.perf_counter()
        complete(item_ctx, item)
        t2 = time.perf_counter()
        claims.append((t1 - t0) * 1000)
        cycles.append((t2 - t0) * 1000)
    return claims, cycles


def _empty_claims(n: int, kind: str = KIND) -> tuple[list[float], list[float]]:
    """Claims that find nothing (every waiting item's key is held): their latency."""
    from tenancy.contexts import AppType, new_request_context
    from workqueue.claim import claim

    rctx = new_request_context(AppType.WORKER)
    claims = []
    for _ in range(n):
        t0 = time.perf_counter()
        assert claim(rctx, "default", [kind], "bench", 30, 1) == []
        claims.append((time.perf_counter() - t0) * 1000)
    return claims, claims


def depth(args: Any, ctx: Any, extra: dict[str, Any]) -> None:
    from ours_kinds import CAPPED_KIND

    from workqueue.claim import claim
    from workqueue.pauses import pause

    kind = CAPPED_KIND if args.config == "kind_capped" else KIND
    keys = KEYS.get(args.config, 0)
    if args.depth > 100_000:
        fill_sql(ctx, args.depth, kind=kind, keys=keys)
        how = "SQL clone of one enqueued row"
    else:
        fill(ctx, args.depth, kind=kind, keys=keys)
        how = "enqueue_many"
    if args.config == "paused_other":
        pause("bench", "default", CAPPED_KIND)
    settle(args.dsn)
    cycles_of = _claim_complete_cycles
    if args.config == "one_key_held":
        # The key's first item is claimed and kept: every later claim walks past the rest.
        from tenancy.contexts import AppType, new_request_context

        rctx = new_request_context(AppType.WORKER)
        assert len(claim(rctx, "default", [kind], "holder", 3600, 1)) == 1
        cycles_of = _empty_claims
    # Warm the plans and the connections (a claim that walks a held key's backlog needs fewer).
    cycles_of(20 if cycles_of is _claim_complete_cycles else 2, kind)
    claims, cycles = cycles_of(args.n, kind)
    common.emit(
        common.figure(
            f"claim_depth_{args.depth}",
            "ms",
            common.median(claims),
            fill=how,
            cycle_ms_median=common.median(cycles),
            how="claim(limit=1) then complete()"
            if args.config != "one_key_held"
            else "claim(limit=1) finding nothing: the one key is held",
            keys=keys,
            **extra,
        )
    )


def bloat(args: Any, ctx: Any, extra: dict[str, Any]) -> None:
    from django.db import connections

    from tenancy.contexts import AppType, new_request_context
    from workqueue import runtime
    from workqueue.claim import claim
    from workqueue.settle import complete_many

    held_back = args.config in RUNWORKER_CONFIGS
    fill(ctx, args.n, held_back=held_back)
    settle(args.dsn)
    fresh = drain(args.dsn, args.config, 1, args.n)
    # churn: push --churn items through claim and batch completion
    fill_sql(ctx, args.churn)
    rctx = new_request_context(AppType.WORKER)
    pushed = 0
    while batch := claim(rctx, "default", [KIND], "churn", 30, 1000):
        done = complete_many([runtime.Fence.of(i) for _, i in batch])
        pushed += len(done)
    # one sweep: the purge of done items (the sweep's step for finished work)
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT now()")
        (now,) = cursor.fetchone()
    purged = 0
    while deleted := runtime.purge_items(rctx, now, batch=5000, max_batches=100):
        purged += deleted
    with connections["admin"].cursor() as cursor:
        cursor.execute("SELECT current_setting('autovacuum')")
        (autovacuum,) = cursor.fetchone()
    connections.close_all()
    fill(ctx, args.n, held_back=held_back)
    churned = drain(args.dsn, args.config, 1, args.n)
    figures = [
        common.figure("bloat_fresh", "items/s", fresh, **extra),
        common.figure(
            "bloat_churned",
            "items/s",
            churned,
            churned_items=pushed,
            purged=purged,
            sweep="purge_items (done and failed items), no manual VACUUM",
            autovacuum=autovacuum,
            **extra,
        ),
    ]
    if autovacuum == "off":
        # A server with autovacuum off (a CI server, say) never reclaims the churn's dead rows;
        # this figure is the same drain after the VACUUM autovacuum would have run.
        with connections["admin"].cursor() as cursor:
            cursor.execute("SELECT now()")
            (now,) = cursor.fetchone()
        while runtime.purge_items(rctx, now, batch=5000, max_batches=100):
            pass
        with connections["admin"].cursor() as cursor:
            cursor.execute("VACUUM workqueue_workitem")
        connections.close_all()
        fill(ctx, args.n, held_back=held_back)
        vacuumed = drain(args.dsn, args.config, 1, args.n)
        figures.append(
            common.figure(
                "bloat_churned_vacuumed",
                "items/s",
                vacuumed,
                sweep="purge_items, then one VACUUM (what autovacuum would have run), then a drain",
                autovacuum=autovacuum,
                **extra,
            )
        )
    common.emit(figures)


def fairness(args: Any, ctx: Any, extra: dict[str, Any]) -> None:
    """Tenant A holds ``--depth`` waiting items; one runworker drains at full speed; tenant B
    enqueues one item every ``--interval-ms`` for ``--seconds``. Reports B's wake latency and
    A's drain rate meanwhile (config ``fairness_off``: the same with WORKQUEUE_FAIR_CLAIM=false).
    """
    import tempfile

    from django.contrib.auth import get_user_model
    from django.db import connections

    from tenancy.contexts import Role
    from tenancy.models import Membership, Org

    User = get_user_model()
    from workqueue import runtime

    fill_sql(ctx, args.depth, {"seq": -1, "quiet": True})
    org_b = Org.objects.using("admin").create(name="B", slug=f"bench-b-{uuid.uuid4().hex[:8]}")
    user_b = User.objects.using("admin").create(username=f"bench-b-{uuid.uuid4().hex[:8]}")
    Membership.objects.using("admin").create(org=org_b, user=user_b, role=Role.MEMBER)
    ctx_b = context(org_b.pk, user_b.pk)
    settle(args.dsn)
    path = Path(tempfile.mkstemp(prefix="fairness-ours-")[1])

    def done_of_a() -> int:
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM workqueue_workitem WHERE status = 'done' AND org_id = %s",
                [ctx.org_id],
            )
            return cursor.fetchone()[0]

    workers = RunWorkers(args.config, 1, **{common.WAKE_ENV: str(path)})
    sent: dict[int, float] = {}
    try:
        time.sleep(2)  # the worker is draining A at full speed
        a_before, t0 = done_of_a(), time.time()
        seq = 0
        while time.time() - t0 < args.seconds:
            runtime.enqueue(ctx_b, KIND, {"seq": seq})
            sent[seq] = common.stamp()
            seq += 1
            time.sleep(args.interval_ms / 1000)
        a_rate = (done_of_a() - a_before) / (time.time() - t0)
        # With fairness off B waits behind all of A's backlog (minutes at a million).
        started = common.read_wake(path, set(sent), timeout=900)
    finally:
        workers.stop()
        path.unlink(missing_ok=True)
    wake = common.wake_figures(sent, started)
    how = {"a_backlog": args.depth, "b_every_ms": args.interval_ms, "seconds": args.seconds}
    common.emit(
        [
            common.figure("fairness_b_wake_p50", "ms", wake[0]["value"], **how, **extra),
            common.figure("fairness_b_wake_p99", "ms", wake[1]["value"], **how, **extra),
            common.figure("fairness_a_drain", "items/s", a_rate, **how, **extra),
        ]
    )


if __name__ == "__main__":
    main()
