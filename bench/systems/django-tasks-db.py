"""`django-tasks-db` peer: Django's tasks framework with the django-tasks-db backend.

Settings: djtasks_settings.py; task: djtasks_jobs.noop (a plain sync function, the
framework's usual form). Workers run the real `db_worker` management command (via
call_command, after django.setup(), so Django's start-up is not timed) with
--no-startup-delay and verbosity 0; otherwise defaults (1 s polling interval, no
LISTEN/NOTIFY). Configs: `default` (CONN_MAX_AGE=0) and `persistent` (None).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != _HERE] + [str(_HERE)]

import _common as c  # noqa: E402

SYSTEM = "django-tasks-db"
CONFIGS = {"default": "0", "persistent": "none"}
FILL_BATCH = 1_000


def django_setup(dsn: str, config: str) -> None:
    # Env vars (not arguments) so the settings module, and any worker we spawn,
    # see the same database and connection policy.
    os.environ["BENCH_DSN"] = dsn
    os.environ["BENCH_CONN_MAX_AGE"] = CONFIGS[config]
    os.environ["DJANGO_SETTINGS_MODULE"] = "djtasks_settings"
    import django

    django.setup()


def settings_extra(config: str) -> dict:
    import django
    import django_tasks_db

    return {
        "config": config,
        "CONN_MAX_AGE": CONFIGS[config],
        "interval_s": 1,
        "startup_delay": False,
        "task": "sync def noop(seq)",
        "django": django.get_version(),
        "django_tasks_db": getattr(django_tasks_db, "__version__", "0.13.0"),
    }


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def enqueue_batched(n: int, batch: int, start_seq: int = 0) -> None:
    """The backend has no bulk API: `batch` enqueue() calls per transaction."""
    from django.db import transaction
    from djtasks_jobs import noop

    for start in range(start_seq, start_seq + n, batch):
        with transaction.atomic():
            for i in range(start, min(start + batch, start_seq + n)):
                noop.enqueue(seq=i)


def worker_main() -> None:
    args = c.worker_args()
    django_setup(args.dsn, args.config)
    from django.core.management import call_command
    from django.db import connection

    connection.ensure_connection()
    c.worker_wait_for_go()
    call_command(
        "db_worker",
        batch=args.kind == "drain",
        startup_delay=False,
        reload=False,
        verbosity=0,
        worker_id=f"bench-{args.index}-{os.getpid()}",
    )
    if args.kind == "drain":
        c.worker_done()


def run_drain(args: argparse.Namespace) -> list[dict]:
    django_setup(args.dsn, args.config)
    import _pg
    from django_tasks_db.models import DBTaskResult

    migrate()
    enqueue_batched(args.n, FILL_BATCH)
    _pg.settle(args.dsn)
    worker_argv = ["drain", "--dsn", args.dsn, "--config", args.config]
    with c.Workers(__file__, worker_argv, args.procs) as workers:
        workers.wait_ready()
        t0 = workers.go()
        t1 = max(workers.wait_done(timeout=3600))
    done = DBTaskResult.objects.successful().count()
    if done != args.n:
        raise RuntimeError(f"drain: {done} of {args.n} successful")
    return [
        c.figure(
            f"drain_p{args.procs}",
            "items/s",
            args.n / (t1 - t0),
            n=args.n,
            seconds=round(t1 - t0, 3),
            verified_done=done,
            worker="db_worker --batch",
            **settings_extra(args.config),
        )
    ]


def run_wake(args: argparse.Namespace) -> list[dict]:
    django_setup(args.dsn, args.config)
    migrate()
    from djtasks_jobs import noop

    wake_file = Path(tempfile.mkdtemp(prefix="bench-djtasks-")) / "wake.txt"
    workers = c.Workers(
        __file__,
        ["serve", "--dsn", args.dsn, "--config", args.config],
        1,
        env={c.WAKE_ENV: str(wake_file)},
    )
    try:
        workers.wait_ready()
        workers.go()
        warm, seqs = c.wake_seqs(args.n)
        sent: dict[int, float] = {}
        for seq in warm + seqs:
            noop.enqueue(seq=seq)
            sent[seq] = c.stamp()  # autocommit: the INSERT has committed
            if seq < 0:
                c.read_wake(wake_file, {seq}, timeout=30)
            time.sleep(args.interval_ms / 1000)
        started = c.read_wake(wake_file, set(seqs), timeout=60)
    finally:
        workers.stop()
        shutil.rmtree(wake_file.parent, ignore_errors=True)
    return c.wake_figures(
        {s: sent[s] for s in seqs},
        started,
        interval_ms=args.interval_ms,
        wakeup="polling (no LISTEN/NOTIFY)",
        **settings_extra(args.config),
    )


def run_enqueue(args: argparse.Namespace) -> list[dict]:
    django_setup(args.dsn, args.config)
    migrate()
    import _pg

    _pg.settle(args.dsn)  # the schema's creation settled before the timed part, as for every system
    from djtasks_jobs import noop

    t0 = time.perf_counter()
    for i in range(args.n):
        noop.enqueue(seq=i)
    single = args.n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    enqueue_batched(args.bulk_n, args.batch, start_seq=args.n)
    bulk = args.bulk_n / (time.perf_counter() - t0)
    return [
        c.figure("enqueue_single", "items/s", single, n=args.n, how="task.enqueue, autocommit"),
        c.figure(
            "enqueue_bulk",
            "items/s",
            bulk,
            n=args.bulk_n,
            batch=args.batch,
            how="task.enqueue x batch inside transaction.atomic (no bulk API)",
        ),
    ]


def depth_fill_sql(depth: int) -> None:
    """Clone one row made by enqueue(); ORM enqueue runs ~2-3k/s, too slow for 1M rows."""
    from django.db import connection
    from django_tasks_db.models import DBTaskResult
    from djtasks_jobs import noop

    template = noop.enqueue(seq=0).id
    table = DBTaskResult._meta.db_table
    cols = [f.column for f in DBTaskResult._meta.concrete_fields]
    override = {
        "id": "gen_random_uuid()",
        "args_kwargs": "jsonb_build_object('args', '[]'::jsonb, 'kwargs', "
        "jsonb_build_object('seq', g))",
        # Distinct, increasing enqueue times keep the FIFO ordering realistic.
        "enqueued_at": "enqueued_at + g * interval '1 microsecond'",
    }
    select = ", ".join(override.get(col, col) for col in cols)
    with connection.cursor() as cur:
        for start in range(1, depth, 100_000):
            cur.execute(
                f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} "
                f"FROM {table}, generate_series(%s::int, %s::int) AS g WHERE id = %s",
                [start, min(start + 100_000, depth) - 1, template],
            )


def run_depth(args: argparse.Namespace) -> list[dict]:
    django_setup(args.dsn, args.config)
    import _pg
    from django.db import transaction
    from django_tasks_db.models import DBTaskResult

    migrate()
    t0 = time.perf_counter()
    depth_fill_sql(args.depth)
    fill_s = time.perf_counter() - t0
    _pg.settle(args.dsn)
    claim_ms: list[float] = []
    cycle_ms: list[float] = []
    for _ in range(args.n):
        # Exactly db_worker's claim: ready() + backend/queue filter, locked .first(),
        # claim() inside one transaction; then set_successful().
        t0 = time.perf_counter()
        with transaction.atomic():
            tasks = DBTaskResult.objects.ready().filter(
                backend_name="default", queue_name__in=["default"]
            )
            result = tasks.get_locked()
            assert result is not None
            result.claim("bench-depth")
        t1 = time.perf_counter()
        result.set_successful(None)
        t2 = time.perf_counter()
        claim_ms.append((t1 - t0) * 1000)
        cycle_ms.append((t2 - t0) * 1000)
    return [
        c.figure(
            f"claim_depth_{args.depth}",
            "ms",
            c.median(claim_ms),
            depth=args.depth,
            claims=args.n,
            cycle_ms_median=round(c.median(cycle_ms), 4),
            claim_ms_p99=round(c.percentile(claim_ms, 99), 4),
            fill="1 enqueue() row cloned by INSERT ... SELECT generate_series",
            fill_seconds=round(fill_s, 1),
            calls="db_worker's get_locked/claim",
            **settings_extra(args.config),
        )
    ]


RUNNERS = {"drain": run_drain, "wake": run_wake, "enqueue": run_enqueue, "depth": run_depth}


def main() -> None:
    if sys.argv[1:2] == ["_worker"]:
        worker_main()
        return
    args = c.parse_args(
        SYSTEM,
        list(RUNNERS),
        configs=list(CONFIGS),
        notes={
            "wake": "polls every 1 s (db_worker --interval default); no LISTEN/NOTIFY",
            "enqueue": "no bulk API: bulk = enqueue() x batch in one transaction",
            "persistent": "only drain and wake: CONN_MAX_AGE only matters in db_worker",
            "bloat": "not run (optional for peers)",
            "raw": "raw system only",
        },
        config_workloads={"persistent": ["drain", "wake"]},
    )
    c.emit(RUNNERS[args.workload](args))


if __name__ == "__main__":
    main()
