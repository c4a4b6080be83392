-- complete_many: mark done each (org, id, token) still held under that token, across tenants; returns the ids completed
UPDATE workqueue_workitem AS w
   SET status = 'done', lease_expires_at = NULL, last_error = '', updated_at = now(),
       updated_by = '00000000-0000-0000-0000-000000000000'
  FROM unnest(%(org_ids)s::uuid[], %(ids)s::uuid[], %(tokens)s::uuid[]) AS t(org_id, id, claim_token)
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND w.id = t.id AND w.org_id = t.org_id AND w.claim_token = t.claim_token
   AND w.status = 'claimed'
RETURNING w.id
