-- take_liveness_lock: take the worker's liveness lock (a session-level advisory lock on `key`, held until this session ends) and record its key in the worker's row (made if new), in one statement on the worker's liveness session; no row when another session holds that key
-- First the server's keepalives and user timeout for this session's socket (`socket_names`, `socket_values`): when the worker's host vanishes the server ends the session within them, and the lock is free for the rescue.
WITH bounded AS MATERIALIZED (
    SELECT count(set_config(s.name, s.value, false)) AS n
      FROM unnest(%(socket_names)s::text[], %(socket_values)s::text[]) AS s(name, value)
), locked AS (
    SELECT pg_try_advisory_lock(%(key)s::bigint) AS held FROM bounded
)
INSERT INTO workqueue_workers_worker AS w
       (id, kind, lane, host, pid, started_at, last_beat_at, state, lock_key, lock_lost_at)
SELECT %(id)s, %(kind)s, %(lane)s, %(host)s, %(pid)s, now(), now(), 'running', %(key)s::bigint,
       NULL
  FROM locked
 WHERE locked.held
    ON CONFLICT (id) DO UPDATE SET lock_key = EXCLUDED.lock_key, lock_lost_at = NULL
RETURNING w.lock_key
