-- requeue_matching: put back to pending (attempts reset, due now, with their ready rows) up to `batch` of the tenant's dead letters a triage filter matches, newest first from `before` down, fenced: only items still failed and not changed since `until` (the moment the operator confirmed); a work.requeued audit entry per item keeps its error, attempts and the filter; announce the lanes on work_available; what waits for one to finish waits for its new end. Returns how many it read, the oldest it read (the next batch's `before`) and how many it changed
WITH picked AS (
    SELECT m.id, m.attempts, m.last_error, m.updated_at
      FROM (
{dead_matching}
       AND w.updated_at <= %(before)s::timestamptz
     ORDER BY w.updated_at DESC
     LIMIT %(batch)s
       FOR UPDATE OF w
      ) AS m
), moved AS (
    UPDATE workqueue_workitem AS w
       SET status = 'pending', attempts = 0, available_at = now(),
           claimed_by = NULL, claim_token = NULL, lease_expires_at = NULL, last_error = '',
           updated_at = now(), ringed_at = now(), updated_by = {system_actor}
      FROM picked p
     WHERE w.id = p.id AND w.status = 'failed' AND w.updated_at = p.updated_at
    RETURNING w.id, w.org_id, w.kind, w.lane, w.priority, w.available_at, w.concurrency_key, w.rate_key,
              w.status, w.has_dependents, p.attempts AS attempts_before,
              p.last_error AS error_before
), made_pending AS (
    SELECT * FROM moved
), {ready_rows}, entries AS (
    SELECT m.org_id, 'work.requeued' AS action, 'workqueue.workitem' AS subject_type,
           m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'attempts', m.attempts_before,
                              'error', m.error_before, 'delay_s', 0,
                              'filter', %(filter)s::jsonb) AS data
      FROM moved m
), audited AS (
{append_entries}
), announced AS (
    SELECT pg_notify('work_available', l.lane) FROM (SELECT DISTINCT lane FROM moved) AS l
), parent_items AS (
    SELECT m.id, m.has_dependents FROM moved m
), {move_dependents}
SELECT (SELECT count(*) FROM picked) AS read, (SELECT min(updated_at) FROM picked) AS oldest,
       (SELECT count(*) FROM moved) AS changed, (SELECT count(*) FROM announced) AS lanes,
       (SELECT count(*) FROM dependents) AS dependents
