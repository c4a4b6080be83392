-- extend_leases: push out the lease of each (org, id, token) still held under that token, across tenants; returns the ids renewed, each with whether someone asked to cancel it (the holder learns it here, with no round trip of its own)
-- Each row is checked against its own places in the arrays, not joined to them, and its status inside that test, not
-- beside the id, so it is found by its key (complete_many says why).
UPDATE ONLY workqueue_workitem AS w
   SET lease_expires_at = now() + make_interval(secs => %(lease_s)s::float8), updated_at = now(),
       updated_by = {system_actor}
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND EXISTS (SELECT FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
                WHERE (%(org_ids)s::uuid[])[p.i] = w.org_id AND (%(tokens)s::uuid[])[p.i] = w.claim_token
                  AND w.status = 'claimed')
RETURNING w.id, w.cancel_requested_at IS NOT NULL AS cancel_requested
