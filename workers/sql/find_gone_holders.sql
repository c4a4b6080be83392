-- find_gone_holders: across tenants, the workers whose liveness lock no session holds (their process, or their liveness session, is gone): mark those not yet marked with the database's clock (only if their row still names that lock), and return, for those marked at least `grace_s` before, each tenant whose items they still hold; forget the lock of those that hold nothing (its key cleared, so their row is read no more); with how many were marked and forgotten and the database's clock, in one row at least
-- An advisory lock on a bigint key is the pair (classid, objid): its high and low 32 bits.
WITH locks AS MATERIALIZED (
    SELECT (l.classid::bigint << 32) | l.objid::bigint AS key
      FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), gone AS (
    SELECT w.id, w.lock_key, w.lock_lost_at
      FROM workqueue_workers_worker w
     WHERE w.lock_key IS NOT NULL
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
       now() AS seen_at, h.claimed_by, h.org_id
  FROM (SELECT 1) AS one
  LEFT JOIN held h ON true
