-- claim_tick: move a schedule on to its latest due tick and count the ticks it skipped, only from the tick this sweeper read (a compare-and-set: of any number of sweepers, one claims each tick), only once that tick's items are all enqueued, and not while it is paused
UPDATE workqueue_workers_schedulestate
   SET last_tick = %(tick)s, delivered = false, skipped = skipped + %(skipped)s, updated_at = now()
 WHERE name = %(name)s AND last_tick = %(seen)s AND last_tick < %(tick)s AND delivered
   AND NOT paused
RETURNING name
