-- start_schedule: a schedule seen for the first time, or just resumed, starts at its latest due tick without enqueuing it (its first item is the next tick's, so nothing fires late); only where it has no tick yet and is not paused
INSERT INTO workqueue_workers_schedulestate AS s (name, last_tick, created_at, updated_at)
VALUES (%(name)s, %(tick)s, now(), now())
    ON CONFLICT (name) DO UPDATE SET last_tick = EXCLUDED.last_tick, delivered = true,
                                     updated_at = now()
 WHERE s.last_tick IS NULL AND NOT s.paused
RETURNING s.name
