-- complete_many_bare: (bench only) the completion as it was before attempts were recorded; mark done each (org, id, token) still held under that token, across tenants; returns the ids completed
-- Each row is found by its key and checked against its own places in the three arrays (array_positions: an id given
-- twice matches either token), not joined to them: the planner cannot know the arrays' length and, believing few rows
-- claimed, nested a scan of the arrays inside the scan of the claimed rows (100 x 100 pairs for a batch of 100).
UPDATE workqueue_workitem AS w
   SET status = 'done', lease_expires_at = NULL, last_error = '', updated_at = now(),
       updated_by = {system_actor}
 WHERE w.id = ANY(%(ids)s::uuid[])
   AND w.status = 'claimed'
   AND EXISTS (SELECT FROM unnest(array_positions(%(ids)s::uuid[], w.id)) AS p(i)
                WHERE (%(org_ids)s::uuid[])[p.i] = w.org_id AND (%(tokens)s::uuid[])[p.i] = w.claim_token)
RETURNING w.id
