-- discard_matching: set aside (status discarded: never run, purged later) up to `batch` of the tenant's dead letters a triage filter matches, newest first from `before` down, fenced: only items still failed and not changed since `until` (the moment the operator confirmed); a work.discarded audit entry per item keeps its payload, error, attempts and the filter. Returns how many it read, the oldest it read (the next batch's `before`) and how many it changed
WITH picked AS (
    SELECT m.id, m.updated_at
      FROM (
{dead_matching}
       AND w.updated_at <= %(before)s::timestamptz
     ORDER BY w.updated_at DESC
     LIMIT %(batch)s
       FOR UPDATE OF w
      ) AS m
), moved AS (
    UPDATE workqueue_workitem AS w
       SET status = 'discarded', claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL,
           updated_at = now(), updated_by = {system_actor}
      FROM picked p
     WHERE w.id = p.id AND w.status = 'failed' AND w.updated_at = p.updated_at
    RETURNING w.*
), entries AS (
    SELECT m.org_id, 'work.discarded' AS action, 'workqueue.workitem' AS subject_type,
           m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'status', 'failed', 'attempts', m.attempts,
                              'error', m.last_error, 'payload', m.payload,
                              'filter', %(filter)s::jsonb) AS data
      FROM moved m
), audited AS (
{append_entries}
)
SELECT (SELECT count(*) FROM picked) AS read, (SELECT min(updated_at) FROM picked) AS oldest,
       (SELECT count(*) FROM moved) AS changed
