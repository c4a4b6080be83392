-- cut_waiting_sessions: end every session waiting for a lock this session holds (a worker's settle, stopped at the row a fault locked), returning each one's pid; an ended session's transaction is rolled back whole
-- pg_locks, not pg_stat_activity: the statistics views keep one snapshot per transaction, and the waiting session may be newer than it.
SELECT DISTINCT l.pid, pg_terminate_backend(l.pid) AS ended
  FROM pg_locks AS l
 WHERE NOT l.granted
   AND pg_backend_pid() = ANY (pg_blocking_pids(l.pid))
