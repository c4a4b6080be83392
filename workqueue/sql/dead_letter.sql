-- dead_letter: fail the item for good (a dead letter), only for the holder of this claim token, and append the audit entry naming it, record the failed attempt (its worker, error and traceback) and meet the edges it ends (those a waiting item needs finished) in the same statement
-- claimed_by is kept: a dead letter names the worker of its last attempt.
WITH failed AS (
    UPDATE ONLY workqueue_workitem
       SET status = 'failed', claim_token = NULL, lease_expires_at = NULL,
           last_error = %(error)s::text, updated_at = now(),
           updated_by = {system_actor}
     WHERE id = %(id)s::uuid AND claim_token = %(claim_token)s::uuid AND status = 'claimed'
    RETURNING *
), entries AS (
    SELECT f.org_id, 'work.dead_lettered' AS action, 'workqueue.workitem' AS subject_type,
           f.id::text AS subject_id,
           jsonb_build_object('kind', f.kind, 'attempts', f.attempts,
                              'permanent', %(permanent)s::boolean,
                              'error', left(%(error)s::text, 2000)) AS data
      FROM failed f
), audited AS (
{append_entries}
), ended AS (
    SELECT f.org_id, f.id, f.attempts, f.claimed_by, f.claimed_at,
           'dead_lettered' AS outcome, %(error)s::text AS error, %(traceback)s::text AS traceback
      FROM failed f
), attempts AS (
{record_attempts}
), parent_items AS (
    SELECT f.id, f.has_dependents FROM failed f
), {move_dependents}
SELECT f.* FROM failed f, (SELECT count(*) FROM dependents) AS r
