-- read_schedules: the database's clock and every schedule's state, in one read (the clock's row comes back even with no schedule yet)
SELECT clock.now, s.name, s.last_tick, s.delivered, s.last_enqueued_tick, s.skipped, s.enqueued,
       s.paused, s.changed_by, s.updated_at
  FROM (SELECT now() AS now) AS clock
  LEFT JOIN workqueue_workers_schedulestate AS s ON true
 ORDER BY s.name
