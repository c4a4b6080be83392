-- bring_forward: make the pending items of a lane's kinds that wait for a later time due now (a test's drain of what is scheduled), moving their ready rows from the ring's later slot to this second's
WITH made_pending AS (
UPDATE workqueue_workitem
   SET available_at = now(), ringed_at = now(), updated_at = now()
 WHERE lane = %(lane)s::text AND kind = ANY(%(kinds)s::text[]) AND status = 'pending'
   AND available_at > now()
RETURNING *
), later AS (
    DELETE FROM workqueue_ready r USING made_pending p WHERE r.id = p.id AND r.slot = 0
), {ready_rows}
SELECT count(*) FROM made_pending
