-- discard: set aside the tenant's dead letters or waiting or pending items (status discarded: never run, purged later, a pending one's ready row forgotten; the edges a waiting or pending one ends are met: those a waiting item needs finished), only those still as the operator saw them (same status and updated_at), appending a work.discarded audit entry per item that keeps its payload, error and attempts
WITH drawn AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(statuses)s::text[], %(updated_ats)s::timestamptz[])
                  AS t(id, status, updated_at)
), seen AS (
    SELECT w.id, w.status, d.updated_at AS drawn_at
      FROM workqueue_workitem w
      JOIN drawn d ON w.id = d.id AND w.status = d.status AND w.updated_at = d.updated_at
     WHERE w.status IN ('failed', 'pending', 'waiting')
), moved AS (
    UPDATE workqueue_workitem AS w
       SET status = 'discarded', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
           updated_at = now(), updated_by = {system_actor}
      FROM seen
     WHERE w.id = seen.id AND w.status = seen.status AND w.updated_at = seen.drawn_at
    RETURNING w.*, seen.status AS status_before
), entries AS (
    SELECT m.org_id, 'work.discarded' AS action, 'workqueue.workitem' AS subject_type,
           m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'status', m.status_before,
                              'attempts', m.attempts, 'error', m.last_error,
                              'payload', m.payload) AS data
      FROM moved m
), audited AS (
{append_entries}
), parent_items AS (
    -- A dead letter's edges were met when it died: only a waiting or pending one ends here.
    SELECT m.id, m.has_dependents FROM moved m WHERE m.status_before <> 'failed'
), {forget_ready}, {move_dependents}
SELECT m.* FROM moved m, (SELECT count(*) FROM dependents) AS r, (SELECT count(*) FROM forgotten) AS f
