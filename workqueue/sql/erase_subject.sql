-- erase_subject: redact the personal fields (fields) of up to batch items of one kind whose payload names the subject (field = value), in the hot table and history (no ONLY), of one tenant or every one, rows another transaction holds skipped; a claimed item only when forced; returns each item's tenant and id
-- updated_at is kept: history's spans are checked by it, and a redaction is not a transition.
WITH doomed AS (
    SELECT w.id FROM workqueue_workitem AS w
     WHERE w.kind = %(kind)s::text AND w.payload ->> %(field)s::text = %(value)s::text
       AND (%(org_id)s::uuid IS NULL OR w.org_id = %(org_id)s::uuid)
       AND (%(force)s::boolean OR w.status <> 'claimed')
     LIMIT %(batch)s FOR UPDATE SKIP LOCKED
)
UPDATE workqueue_workitem AS w
   SET payload = w.payload || COALESCE(
           (SELECT jsonb_object_agg(k, %(mark)s::jsonb) FROM jsonb_object_keys(w.payload) AS k
             WHERE k = ANY(%(fields)s::text[])), '{}'::jsonb)
  FROM doomed WHERE w.id = doomed.id
RETURNING w.org_id, w.id
