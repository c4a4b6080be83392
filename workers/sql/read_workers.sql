-- read_workers: the workers that beat within stale_after_s, by state (running, draining, stopping), and the newest beat's age
SELECT state, count(*) AS workers
  FROM workqueue_workers_worker
 WHERE state <> 'offline' AND last_beat_at > now() - make_interval(secs => %(stale_after_s)s::float8)
 GROUP BY state
