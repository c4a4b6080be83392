-- cancel_seen: the cancel of the rows the including statement's `seen` locked (id, status_before, reason): a waiting or pending one at once (status cancelled, a pending one's ready row forgotten, its reason, if any, as its last error; the edges it ends met: those a waiting item needs finished), a claimed one by asking its holder (cancel_requested_at), each with its work.cancelled or work.cancel_requested audit entry (with the reason, if any); the one spelling for cancel_items, cancel_drawn and cancel_workflow
moved AS (
    UPDATE workqueue_workitem AS w
       SET status = CASE WHEN seen.status_before = 'claimed' THEN 'claimed' ELSE 'cancelled' END,
           last_error = CASE WHEN seen.status_before <> 'claimed' AND seen.reason IS NOT NULL
                             THEN seen.reason ELSE w.last_error END,
           cancel_requested_at = now(), updated_at = now(), updated_by = {system_actor}
      FROM seen
     WHERE w.id = seen.id AND w.status = seen.status_before AND w.cancel_requested_at IS NULL
    RETURNING w.*, seen.status_before, seen.reason
), entries AS (
    SELECT m.org_id,
           CASE WHEN m.status = 'cancelled' THEN 'work.cancelled' ELSE 'work.cancel_requested' END
               AS action,
           'workqueue.workitem' AS subject_type, m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'status', m.status_before, 'attempts', m.attempts,
                              'claimed_by', m.claimed_by, 'payload', m.payload)
           || CASE WHEN m.reason IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('reason', m.reason) END AS data
      FROM moved m
), parent_items AS (
    SELECT m.id, m.has_dependents FROM moved m WHERE m.status = 'cancelled'
), {forget_ready}, {move_dependents}, audited AS (
{append_entries}
