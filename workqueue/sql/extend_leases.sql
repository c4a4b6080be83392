-- extend_leases: push out the lease of each (org, id, token) still held under that token, across tenants; returns the ids renewed
UPDATE workqueue_workitem AS w
   SET lease_expires_at = now() + make_interval(secs => %(lease_s)s::float8), updated_at = now(),
       updated_by = '00000000-0000-0000-0000-000000000000'
  FROM unnest(%(org_ids)s::uuid[], %(ids)s::uuid[], %(tokens)s::uuid[]) AS t(org_id, id, claim_token)
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND w.id = t.id AND w.org_id = t.org_id AND w.claim_token = t.claim_token
   AND w.status = 'claimed'
RETURNING w.id
