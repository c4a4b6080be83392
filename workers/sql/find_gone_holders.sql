-- find_gone_holders: when `turn_s` is 0, or no look was taken in the last `turn_s` seconds (the turn then taken: the database's clock its time, with how many workers have a lock), across tenants, the workers whose liveness lock no session holds (their process, or their liveness session, is gone): mark those not yet marked with the database's clock (only if their row still names that lock), and return, for those marked at least `grace_s` before, each tenant whose items they still hold; forget the lock of those that hold nothing (its key cleared, so their row is read no more); with how many were marked and forgotten, the database's clock and the workers with a lock at the last look, in one row at least
-- The turn: a timer that asks while another's look runs waits for that look's commit, then finds the turn taken.
-- An advisory lock on a bigint key is the pair (classid, objid): its high and low 32 bits.
WITH turn AS (
    INSERT INTO workqueue_workers_rescueturn AS t (id, looked_at, workers)
    SELECT 1, now(), (SELECT count(*) FROM workqueue_workers_worker WHERE lock_key IS NOT NULL)
     WHERE NOT EXISTS (SELECT FROM workqueue_workers_rescueturn r
                        WHERE r.looked_at > now() - make_interval(secs => %(turn_s)s::float8))
    ON CONFLICT (id) DO UPDATE SET looked_at = now(), workers = excluded.workers
     WHERE t.looked_at <= now() - make_interval(secs => %(turn_s)s::float8)
    RETURNING t.workers
), go AS MATERIALIZED (
    SELECT %(turn_s)s::float8 <= 0 OR EXISTS (SELECT FROM turn) AS yes
), locks AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | l.objid::bigint AS key
      FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND (SELECT yes FROM go)
), gone AS (
    SELECT w.id, w.lock_key, w.lock_lost_at
      FROM workqueue_workers_worker w
     WHERE w.lock_key IS NOT NULL AND (SELECT yes FROM go)
       AND NOT EXISTS (SELECT FROM locks WHERE locks.key = w.lock_key)
), marked AS (
    UPDATE workqueue_workers_worker AS w
       SET lock_lost_at = now()
      FROM gone g
     WHERE w.id = g.id AND w.lock_key = g.lock_key AND w.lock_lost_at IS NULL
    RETURNING w.id
), due AS (
    SELECT g.id, g.lock_key
      FROM gone g
     WHERE g.lock_lost_at <= now() - make_interval(secs => %(grace_s)s::float8)
), held AS (
    SELECT DISTINCT i.claimed_by, i.org_id
      FROM workqueue_workitem i
      JOIN due d ON i.claimed_by = d.id
     WHERE i.status = 'claimed'
), forgotten AS (
    UPDATE workqueue_workers_worker AS w
       SET lock_key = NULL, lock_lost_at = NULL
      FROM due d
     WHERE w.id = d.id AND w.lock_key = d.lock_key
       AND NOT EXISTS (SELECT FROM held h WHERE h.claimed_by = d.id)
    RETURNING w.id
)
SELECT (SELECT count(*) FROM marked) AS marked, (SELECT count(*) FROM forgotten) AS forgotten,
       now() AS seen_at,
       coalesce((SELECT workers FROM turn),
                (SELECT workers FROM workqueue_workers_rescueturn WHERE id = 1), 0) AS fleet,
       h.claimed_by, h.org_id
  FROM (SELECT 1) AS one
  LEFT JOIN held h ON true
