-- tick_done: close the schedule's claimed tick (fenced on that tick: a sweeper that lost it changes nothing): enqueued, its items are all in the queue; not enqueued (the schedule's item was refused), it counts as skipped
UPDATE workqueue_workers_schedulestate
   SET delivered = true,
       last_enqueued_tick = CASE WHEN %(enqueued)s THEN last_tick ELSE last_enqueued_tick END,
       enqueued = enqueued + CASE WHEN %(enqueued)s THEN 1 ELSE 0 END,
       skipped = skipped + CASE WHEN %(enqueued)s THEN 0 ELSE 1 END,
       updated_at = now()
 WHERE name = %(name)s AND last_tick = %(tick)s AND NOT delivered
RETURNING name
