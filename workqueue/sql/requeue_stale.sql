-- requeue_stale: hand back the tenant's claimed items whose lease passed before `before`, or (the rescue's locking) those the named gone holders claimed before `before`, each requeued with its ready row (the locking subquery is one of the querysets workqueue/maintenance.py compiles; the error and the attempt's outcome say which); one whose attempts are spent becomes a dead letter instead, and one someone asked to cancel ends cancelled, each with its audit entry (and the edges it ends met: those a waiting item needs finished), and each attempt so ended is recorded, and the lanes of the items handed back are announced on work_available, in the same statement
-- (attempts >= max_attempts spells rules.is_exhausted once more; tests/contract/test_maintenance.py holds them together)
-- `stale` names each row's holder as it was (the update clears it for a requeued item; a dead letter keeps it).
WITH stale AS (
    {locking}
), moved AS (
UPDATE ONLY workqueue_workitem AS w
   SET status = CASE WHEN w.cancel_requested_at IS NOT NULL THEN 'cancelled'
                     WHEN w.attempts >= w.max_attempts THEN 'failed' ELSE 'pending' END,
       available_at = now(),
       claimed_by = CASE WHEN w.cancel_requested_at IS NULL AND w.attempts >= w.max_attempts
                         THEN w.claimed_by END,
       claim_token = NULL, lease_expires_at = NULL,
       last_error = CASE WHEN w.cancel_requested_at IS NOT NULL
                         THEN {cause} || '; cancelled as asked'
                         WHEN w.attempts >= w.max_attempts
                         THEN {cause} || '; attempts spent' ELSE {cause} END,
       updated_at = now(), ringed_at = now(),
       updated_by = {system_actor}
  FROM stale
 WHERE w.id = stale.id
RETURNING w.*
), made_pending AS (
    SELECT * FROM moved
), {ready_rows}, entries AS (
    SELECT m.org_id,
           CASE WHEN m.status = 'failed' THEN 'work.dead_lettered' ELSE 'work.cancelled' END
               AS action,
           'workqueue.workitem' AS subject_type, m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'attempts', m.attempts, 'permanent', false,
                              'error', m.last_error) AS data
      FROM moved m
     WHERE m.status IN ('failed', 'cancelled')
), audited AS (
{append_entries}
), ended AS (
    SELECT m.org_id, m.id, m.attempts, s.claimed_by, m.claimed_at,
           {outcome} AS outcome, m.last_error AS error, '' AS traceback
      FROM moved m JOIN stale s ON s.id = m.id
), attempts AS (
{record_attempts}
), parent_items AS (
    SELECT m.id, m.has_dependents FROM moved m WHERE m.status IN ('failed', 'cancelled')
), {move_dependents}, announced AS (
    SELECT pg_notify('work_available', l.lane)
      FROM (SELECT DISTINCT lane FROM moved WHERE status = 'pending') AS l
)
SELECT m.* FROM moved m, (SELECT count(*) FROM dependents) AS r, (SELECT count(*) FROM announced) AS a
