"""Drain rate of Django ``@task`` no-ops through ``manage.py runworker``, beside the NOOP kind's.

    .venv/bin/python bench/tasks_drain.py [--n 20000] [--reps 3] [--workloads noop,task,atask]
                                          [--capacity N]

Not a test: a measurement, printed. Each workload fills the queue with ``--n`` items of one
tenant, then starts one ``runworker <KIND> --once`` process (it runs what is there and exits)
and reads the drain rate from the database's own clock: items completed over the span from
the first completion to the last (so interpreter and Django start-up stay out of it). The
workloads alternate within each repetition; min / median / max are printed.

- ``noop``: the NOOP kind's async handler (``runworker NOOP``), the queue's own floor;
- ``task``: a sync ``@task`` no-op (``bench/noop_tasks.py``), run in the worker's threads;
- ``atask``: an async ``@task`` no-op, run on the worker's event loop.

Task items are written with ``enqueue_many`` and the payload ``Task.enqueue()`` writes (the
contract tests pin its shape), because one-by-one enqueues would make the fill the slow part.
Each worker runs at its default capacity (NOOP 200 items at once, DJANGO_TASK 100; it runs
sync functions in the threads ``WORKER_DB_POOL_SIZE`` leaves after its own connections) unless
``--capacity`` sets one for all. The workers log at ``LOG_LEVEL=WARNING``, but
Django's ``django.tasks`` logger at ``--task-log-level`` (INFO, Django's default, writes two
lines a task; WARNING shows what they cost).

It runs on the database the settings name (the embedded server when ``DATABASE_URL`` is
unset), in a scratch database of its own (``workqueue_bench_tasks``) that it drops at the end.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

SCRATCH = "workqueue_bench_tasks"
WORKLOADS = {
    # name: (kind to run, payload of each item)
    "noop": ("NOOP", {}),
    "task": (
        "DJANGO_TASK",
        {"path": "bench.noop_tasks.noop", "args": [], "kwargs": {}, "backend": "default"},
    ),
    "atask": (
        "DJANGO_TASK",
        {"path": "bench.noop_tasks.anoop", "args": [], "kwargs": {}, "backend": "default"},
    ),
}


def setup() -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("create_logins", verbosity=0, stdout=open(os.devnull, "w"))
    admin = connections["admin"]
    admin.settings_dict["TEST"]["NAME"] = SCRATCH
    admin.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    for alias in ("default", "system"):
        connections[alias].close()
        connections[alias].creation.set_as_test_mirror(admin.settings_dict)


def teardown() -> None:
    from django.db import connections

    connections.close_all()
    with connections["admin"].cursor() as cursor:  # a worker that did not exit cleanly
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    connections.close_all()
    connections["admin"].creation.destroy_test_db(SCRATCH, verbosity=0)


def tenant() -> Any:
    from django.contrib.auth import get_user_model

    from tenancy.contexts import AppType, OpContext, Role, new_request_context
    from tenancy.models import Membership, Org

    User = get_user_model()

    tag = uuid.uuid4().hex[:8]
    org = Org.objects.using("admin").create(name="Bench", slug=f"bench-{tag}")
    user = User.objects.using("admin").create(username=f"bench-{tag}")
    Membership.objects.using("admin").create(org=org, user=user, role=Role.MEMBER)
    return OpContext(org.pk, user.pk, Role.MEMBER, new_request_context(AppType.CLI))


def empty_queue() -> None:
    from django.db import connections

    with connections["admin"].cursor() as cursor:
        cursor.execute("TRUNCATE workqueue_workitem, workqueue_tasks_taskrecord")
        cursor.execute("VACUUM ANALYZE workqueue_workitem")


def fill(ctx: Any, kind: str, payload: dict[str, Any], n: int) -> None:
    from workqueue.runtime import NewItem, enqueue_many

    for start in range(0, n, 1000):
        enqueue_many(ctx, [NewItem(kind, payload) for _ in range(min(1000, n - start))])


def worker_env(capacity: int | None, task_log_level: str) -> dict[str, str]:
    from django.db import connections

    from project.database import url_for

    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKER_")}
    env.update(
        DATABASE_URL=url_for(connections["default"].settings_dict),
        SYSTEM_DATABASE_URL=url_for(connections["system"].settings_dict),
        ADMIN_DATABASE_URL=url_for(connections["admin"].settings_dict),
        LOG_LEVEL="WARNING",
        TASKS_LOG_LEVEL=task_log_level,
        DEBUG="false",
        # With DEBUG off the reference site refuses its built-in key: a throwaway one per run.
        SECRET_KEY=os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
    )
    if capacity is not None:
        env["WORKER_CAPACITY"] = str(capacity)
    return env


def drain(kind: str, n: int, env: dict[str, str]) -> tuple[float, float]:
    """Run one worker until the queue is empty; (items/s by the database's clock, wall s)."""
    from django.db import connections

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "manage.py", "runworker", kind, "--once", "--metrics-port", "-1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"runworker {kind} failed:\n{done.stdout}{done.stderr}")
    with connections["admin"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE status = 'done'), count(*),"
            " EXTRACT(EPOCH FROM max(updated_at) - min(updated_at))"
            " FROM workqueue_workitem"
        )
        completed, total, span = cursor.fetchone()
    if completed != n or total != n:
        with connections["admin"].cursor() as cursor:
            cursor.execute(
                "SELECT status, count(*), min(last_error) FROM workqueue_workitem"
                " WHERE status <> 'done' GROUP BY status"
            )
            left = cursor.fetchall()
        raise SystemExit(
            f"runworker {kind}: {completed} of {n} items done; left: {left}\n"
            f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return (completed - 1) / float(span), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="items per drain")
    parser.add_argument("--reps", type=int, default=3, help="drains per workload (alternating)")
    parser.add_argument(
        "--workloads", default="noop,task,atask", help="comma-separated: noop, task, atask"
    )
    parser.add_argument("--capacity", type=int, help="one capacity for every worker")
    parser.add_argument(
        "--task-log-level",
        default="INFO",
        help="TASKS_LOG_LEVEL in the workers (INFO, Django's default: two lines a task)",
    )
    args = parser.parse_args()
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(names) - set(WORKLOADS)
    if unknown or args.n < 2 or args.reps < 1:
        parser.error(f"workloads from {', '.join(WORKLOADS)}; --n >= 2; --reps >= 1")
    setup()
    try:
        from django.db import connections

        settings = connections["admin"].settings_dict
        where = settings.get("HOST") or "localhost"
        print(
            f"database {settings['NAME']} on {where}; n={args.n} reps={args.reps} "
            f"capacity={args.capacity or 'default'} task log level={args.task_log_level}"
        )
        ctx = tenant()
        env = worker_env(args.capacity, args.task_log_level)
        rates: dict[str, list[float]] = {name: [] for name in names}
        for rep in range(args.reps):
            for name in names:
                kind, payload = WORKLOADS[name]
                empty_queue()
                fill(ctx, kind, payload, args.n)
                rate, wall = drain(kind, args.n, env)
                rates[name].append(rate)
                print(f"rep {rep + 1} {name:6} {rate:10,.0f} items/s  (process {wall:.1f} s)")
        print("\nworkload   min        median     max   (items/s)   vs noop (median)")
        base = statistics.median(rates["noop"]) if "noop" in rates else None
        for name, values in rates.items():
            median = statistics.median(values)
            ratio = f"{median / base:.2f}x" if base else "-"
            print(
                f"{name:8} {min(values):8,.0f} {median:10,.0f} {max(values):8,.0f}"
                f"               {ratio}"
            )
    finally:
        teardown()


if __name__ == "__main__":
    main()
