-- cancel_held: end the item cancelled, by its holder once its lease renewal reported a cancel request, only for the holder of this claim token; appends the work.cancelled audit entry and meets the edges it ends (those a waiting item needs finished) in the same statement
WITH moved AS (
    UPDATE ONLY workqueue_workitem
       SET status = 'cancelled', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
           last_error = %(note)s::text, updated_at = now(), updated_by = {system_actor}
     WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
    RETURNING *
), entries AS (
    SELECT m.org_id, 'work.cancelled' AS action, 'workqueue.workitem' AS subject_type,
           m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'status', 'claimed', 'attempts', m.attempts,
                              'by', 'holder', 'note', m.last_error) AS data
      FROM moved m
), audited AS (
{append_entries}
), parent_items AS (
    SELECT m.id, m.has_dependents FROM moved m
), {move_dependents}
SELECT m.* FROM moved m, (SELECT count(*) FROM dependents) AS r
