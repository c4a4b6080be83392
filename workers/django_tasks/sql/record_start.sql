-- record_start: note an attempt's start on each task's record (its worker appended, the time; the record made on the first), for each (org, id, token) still held under that token, across tenants; returns each record as it now stands
-- FOR KEY SHARE: the item is checked as it is now, not as this statement's snapshot saw it, so a holder that just lost the claim writes nothing.
WITH held AS (
    SELECT w.id, w.org_id, w.claimed_by
      FROM unnest(%(org_ids)s::uuid[], %(ids)s::uuid[], %(tokens)s::uuid[]) AS t(org_id, id, claim_token)
      JOIN workqueue_workitem w
        ON w.id = t.id AND w.org_id = t.org_id AND w.claim_token = t.claim_token
       AND w.status = 'claimed'
       FOR KEY SHARE OF w
)
INSERT INTO workqueue_tasks_taskrecord AS r
       (item_id, org_id, worker_ids, started_at, last_attempted_at, errors)
SELECT held.id, held.org_id, jsonb_build_array(held.claimed_by), now(), now(), '[]'::jsonb
  FROM held
ON CONFLICT (item_id) DO UPDATE
   SET worker_ids = r.worker_ids || excluded.worker_ids,
       last_attempted_at = excluded.last_attempted_at
RETURNING r.item_id, r.worker_ids::text, r.started_at, r.last_attempted_at, r.errors::text
