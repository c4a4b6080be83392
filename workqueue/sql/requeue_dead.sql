-- requeue_dead: put the tenant's dead letters back to pending (attempts reset, due after delay_s, with their ready rows), only those still as the operator saw them (status failed and the same updated_at), appending a work.requeued audit entry per item that keeps the error and attempts it had; announce each lane on work_available when due now; what waits for one to finish (a group's on_complete not yet started) waits for its new end
-- seen reads the rows as drawn; the UPDATE repeats the fence, so a row changed meanwhile (re-checked after a concurrent write commits) is left alone.
WITH drawn AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(statuses)s::text[], %(updated_ats)s::timestamptz[])
                  AS t(id, status, updated_at)
), seen AS (
    SELECT w.id, w.attempts, w.last_error, d.updated_at AS drawn_at
      FROM workqueue_workitem w
      JOIN drawn d ON w.id = d.id AND w.status = d.status AND w.updated_at = d.updated_at
     WHERE w.status = 'failed'
), moved AS (
    UPDATE workqueue_workitem AS w
       SET status = 'pending', attempts = 0,
           available_at = now() + make_interval(secs => %(delay_s)s::float8),
           claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL, last_error = '',
           updated_at = now(), ringed_at = now(), updated_by = {system_actor}
      FROM seen
     WHERE w.id = seen.id AND w.status = 'failed' AND w.updated_at = seen.drawn_at
    RETURNING w.*, seen.attempts AS attempts_before, seen.last_error AS error_before
), made_pending AS (
    SELECT * FROM moved
), {ready_rows}, entries AS (
    SELECT m.org_id, 'work.requeued' AS action, 'workqueue.workitem' AS subject_type,
           m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'attempts', m.attempts_before,
                              'error', m.error_before, 'delay_s', %(delay_s)s::float8) AS data
      FROM moved m
), audited AS (
{append_entries}
), announced AS (
    SELECT pg_notify('work_available', l.lane)
      FROM (SELECT DISTINCT lane FROM moved) AS l
     WHERE %(delay_s)s::float8 = 0
), parent_items AS (
    SELECT m.id, m.has_dependents FROM moved m
), {move_dependents}
SELECT m.* FROM moved m, (SELECT count(*) FROM announced) AS a,
       (SELECT count(*) FROM dependents) AS r
