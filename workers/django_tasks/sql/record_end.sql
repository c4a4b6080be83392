-- record_end: append each failed attempt's error to its task's record (keeping the last `keep`), for each (org, id, token) still held under that token, across tenants; returns the ids written
-- FOR KEY SHARE: as in record_start, the item is checked as it is now.
WITH held AS (
    SELECT t.id, t.error
      FROM unnest(%(org_ids)s::uuid[], %(ids)s::uuid[], %(tokens)s::uuid[], %(errors)s::text[])
           AS t(org_id, id, claim_token, error)
      JOIN workqueue_workitem w
        ON w.id = t.id AND w.org_id = t.org_id AND w.claim_token = t.claim_token
       AND w.status = 'claimed'
       FOR KEY SHARE OF w
)
UPDATE workqueue_tasks_taskrecord AS r
   SET errors = (SELECT jsonb_agg(e ORDER BY n)
                   FROM jsonb_array_elements(r.errors || jsonb_build_array(held.error::jsonb))
                        WITH ORDINALITY AS x(e, n)
                  WHERE n > jsonb_array_length(r.errors) + 1 - %(keep)s::integer)
  FROM held
 WHERE r.item_id = held.id
RETURNING r.item_id
