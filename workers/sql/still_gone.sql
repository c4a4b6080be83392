-- still_gone: of the named workers found gone at a look (`seen_at`, their lock seen free since at least `grace_s` before it), those whose row still names that lost lock and whose lock no session holds now; each row locked FOR SHARE until the caller's transaction ends, so a worker that takes a new lock meanwhile (its row updated) is either seen back here or waits until the hand-back beside this has committed, and then finds its items gone
-- An advisory lock on a bigint key is the pair (classid, objid): its high and low 32 bits.
SELECT w.id
  FROM workqueue_workers_worker AS w
 WHERE w.id = ANY(%(holders)s::text[])
   AND w.lock_key IS NOT NULL
   AND w.lock_lost_at <= %(seen_at)s::timestamptz - make_interval(secs => %(grace_s)s::float8)
   AND NOT EXISTS (SELECT FROM pg_locks l
                    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND ((l.classid::bigint << 32) | l.objid::bigint) = w.lock_key)
   FOR SHARE OF w
