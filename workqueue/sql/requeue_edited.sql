-- requeue_edited: replace a dead letter's payload and put it back to pending now (attempts reset, with its ready row), only if it is still as the operator saw it (status failed and the same updated_at), appending a work.requeued_edited audit entry with the payload before and after and the error and attempts it had; announce its lane on work_available; what waits for it to finish waits for its new end
WITH seen AS (
    SELECT w.id, w.attempts, w.last_error, w.payload
      FROM workqueue_workitem w
     WHERE w.id = %(id)s::uuid AND w.status = 'failed' AND w.updated_at = %(updated_at)s::timestamptz
), moved AS (
    UPDATE workqueue_workitem AS w
       SET payload = %(payload)s::jsonb, status = 'pending', attempts = 0, available_at = now(),
           claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL, last_error = '',
           updated_at = now(), ringed_at = now(), updated_by = {system_actor}
      FROM seen
     WHERE w.id = seen.id AND w.status = 'failed' AND w.updated_at = %(updated_at)s::timestamptz
    RETURNING w.*, seen.attempts AS attempts_before, seen.last_error AS error_before,
              seen.payload AS payload_before
), made_pending AS (
    SELECT * FROM moved
), {ready_rows}, entries AS (
    SELECT m.org_id, 'work.requeued_edited' AS action, 'workqueue.workitem' AS subject_type,
           m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'attempts', m.attempts_before,
                              'error', m.error_before, 'payload_before', m.payload_before,
                              'payload', m.payload) AS data
      FROM moved m
), audited AS (
{append_entries}
), announced AS (
    SELECT pg_notify('work_available', m.lane) FROM moved m
), parent_items AS (
    SELECT m.id, m.has_dependents FROM moved m
), {move_dependents}
SELECT m.* FROM moved m, (SELECT count(*) FROM announced) AS a,
       (SELECT count(*) FROM dependents) AS r
