-- keep_claims: of the claims a worker held when its liveness session failed (each (org, id, token)), those that still hold by the database's clock (claimed under that token, the lease not run out), across tenants, on the worker's new liveness session; each row locked FOR SHARE for the statement, so a hand-back on its way ends first and the row is read as it left it
-- Each row is checked against its own places in the arrays, not joined to them (extend_leases says why).
SELECT w.id
  FROM ONLY workqueue_workitem AS w
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND EXISTS (SELECT FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
                WHERE (%(org_ids)s::uuid[])[p.i] = w.org_id AND (%(tokens)s::uuid[])[p.i] = w.claim_token
                  AND w.status = 'claimed' AND w.lease_expires_at > now())
   FOR SHARE OF w
