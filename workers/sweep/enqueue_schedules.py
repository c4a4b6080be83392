"""Sweep step: enqueue each declared schedule's latest due tick (``workers.schedules``).

The database's clock decides what is due: one read gives ``now()`` and every schedule's state.
For each schedule that is not paused: a new (or just resumed) one starts at its latest due tick
without enqueuing it; a tick claimed by a sweeper that did not finish is enqueued again (its
idempotency key makes what was already enqueued a ``KEY_EXISTS``); then, when a later tick is
due, the schedule is moved on to the latest one by a compare-and-set on the tick read, counting
the ticks in between as skipped (no burst after downtime), and that tick's items are enqueued,
one per tenant it serves, each under its tenant's row-level security with the key
``schedule:<name>:<tick>``. Correctness comes from the compare-and-set and the key, not from
the sweep's mutex: sweepers that race each enqueue a tick once between them.

No schedule declared: nothing is read.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import NamedTuple

from django.db import connections

from tenancy.contexts import RequestContext
from workers import schedule_state
from workers.schedules import Schedule, all_schedules, tenants_of
from workers.sweep.config import SweepSettings
from workqueue import runtime
from wqcore.logs import log_event

logger = logging.getLogger(__name__)

# Schedules whose last attempt failed in this process: a failure is logged with its traceback
# when a streak starts, and once more when it ends.
_FAILING: set[str] = set()


class Enqueued(NamedTuple):
    # Ticks enqueued (each for every tenant its schedule serves), and the items they wrote.
    ticks: int = 0
    items: int = 0
    # Items another sweeper (or an earlier try) had enqueued already: the key met them.
    existing: int = 0
    # Ticks skipped (due while no sweeper ran), counted this pass.
    skipped: int = 0
    # Schedules started afresh (new, or just resumed).
    started: int = 0
    # Schedules that failed this pass (logged).
    failed: int = 0


def run_once(rctx: RequestContext, settings: SweepSettings) -> Enqueued:
    schedules = all_schedules()
    if not schedules:
        return Enqueued()
    now, states = schedule_state.read_states()
    total = Enqueued()
    for schedule in schedules:
        try:
            done = _advance(schedule, states.get(schedule.name), now, rctx)
        except Exception:
            if schedule.name not in _FAILING:
                _FAILING.add(schedule.name)
                log_event(
                    logger, logging.ERROR, "schedule_failed", exc_info=True, schedule=schedule.name
                )
            total = total._replace(failed=total.failed + 1)
            # A broken connection must not fail every later schedule too.
            for conn in connections.all(initialized_only=True):
                conn.close_if_unusable_or_obsolete()
            continue
        if schedule.name in _FAILING:
            _FAILING.discard(schedule.name)
            log_event(logger, logging.INFO, "schedule_recovered", schedule=schedule.name)
        total = _sum(total, done)
    return total


def _sum(a: Enqueued, b: Enqueued) -> Enqueued:
    return Enqueued(*(x + y for x, y in zip(a, b, strict=True)))


def _advance(
    schedule: Schedule, state: schedule_state.State | None, now: datetime, rctx: RequestContext
) -> Enqueued:
    """What one schedule does this pass (see the module's docstring)."""
    if state is not None and state.paused:
        return Enqueued()
    latest = schedule.latest_tick(now)
    if state is None or state.last_tick is None:
        started = schedule_state.start(schedule.name, latest)
        return Enqueued(started=int(started))
    done = Enqueued()
    last = state.last_tick
    if not state.delivered:
        done = _deliver(schedule, last, rctx)
    if latest <= last:
        return done
    skipped = schedule.ticks_between(last, latest)
    if not schedule_state.claim_tick(schedule.name, last, latest, skipped):
        return done  # another sweeper moved it on first (or it was paused meanwhile)
    if skipped:
        log_event(
            logger,
            logging.INFO,
            "schedule_skipped",
            schedule=schedule.name,
            ticks=skipped,
            after=last.isoformat(),
            latest=latest.isoformat(),
        )
    done = _sum(done, _deliver(schedule, latest, rctx))
    return done._replace(skipped=done.skipped + skipped)


def _deliver(schedule: Schedule, tick: datetime, rctx: RequestContext) -> Enqueued:
    """Enqueue ``tick``'s item for every tenant the schedule serves, then close the tick.

    An item the queue refuses (``InvalidPayload``: a payload callable that returned what the
    kind does not take) cannot get better by trying again: the tick is closed as skipped and
    logged. Any other error leaves the tick open for the next pass."""
    key = schedule.key(tick)
    inserted = existing = 0
    try:
        item = schedule.item(tick)
        for ctx in tenants_of(schedule, rctx):
            _, outcome = runtime.enqueue(
                ctx,
                item.kind,
                item.payload,
                idempotency_key=key,
                lane=item.lane,
                priority=item.priority,
                max_attempts=item.max_attempts,
            )
            if outcome == runtime.Outcome.INSERTED:
                inserted += 1
            else:
                existing += 1
    except runtime.InvalidPayload as exc:
        log_event(
            logger, logging.ERROR, "schedule_refused", schedule=schedule.name, tick=key, error=exc
        )
        schedule_state.tick_done(schedule.name, tick, enqueued=False)
        return Enqueued(skipped=1)
    schedule_state.tick_done(schedule.name, tick)
    log_event(
        logger,
        logging.INFO,
        "schedule_enqueued",
        schedule=schedule.name,
        tick=tick.isoformat(),
        items=inserted,
        existing=existing,
    )
    return Enqueued(ticks=1, items=inserted, existing=existing)
