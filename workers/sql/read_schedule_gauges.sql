-- read_schedule_gauges: each schedule's last enqueued tick (epoch seconds), skipped and enqueued ticks and whether it is paused, with the database's clock, for /metrics
SELECT name, extract(epoch FROM last_enqueued_tick)::float8 AS last_tick_s, skipped, enqueued,
       paused, extract(epoch FROM now())::float8 AS now_s
  FROM workqueue_workers_schedulestate
