-- read_live_lanes: the lanes live workers serve (a worker row not offline whose last beat is within stale_after_s): a lane with due work and none of these is unserved
SELECT DISTINCT lane
  FROM workqueue_workers_worker
 WHERE state <> 'offline' AND last_beat_at > now() - make_interval(secs => %(stale_after_s)s::float8)
