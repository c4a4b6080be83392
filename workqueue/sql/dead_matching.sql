-- dead_matching: the dead letters a triage filter matches (failed no later than until, and not before since; of the kind, lane and tenant when named; the error containing error_like when given, then only within the last window_s unless since is given), as one spelling included by the statements that count, group, requeue or discard them, so each reads the same rows (through workitem_triage_idx)
SELECT w.*
  FROM workqueue_workitem w
 WHERE w.status = 'failed'
   AND w.updated_at <= LEAST(%(until)s::timestamptz, now())
   AND w.updated_at >= COALESCE(%(since)s::timestamptz,
                                CASE WHEN %(error_like)s::text IS NULL THEN '-infinity'::timestamptz
                                     ELSE now() - make_interval(secs => %(window_s)s::float8) END)
   AND (%(kind)s::text IS NULL OR w.kind = %(kind)s::text)
   AND (%(lane)s::text IS NULL OR w.lane = %(lane)s::text)
   AND (%(org_id)s::uuid IS NULL OR w.org_id = %(org_id)s::uuid)
   AND (%(error_like)s::text IS NULL OR w.last_error ILIKE %(error_like)s::text)
