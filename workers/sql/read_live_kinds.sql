-- read_live_kinds: each (lane, kind) a live worker serves (a worker row not offline whose last beat is within stale_after_s; its kinds comma-separated): a kind with due work in a lane and none of these is unserved
SELECT DISTINCT lane, served.kind
  FROM workqueue_workers_worker,
       unnest(string_to_array(workqueue_workers_worker.kind, ',')) AS served(kind)
 WHERE state <> 'offline' AND last_beat_at > now() - make_interval(secs => %(stale_after_s)s::float8)
