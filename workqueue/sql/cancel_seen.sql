-- cancel_seen: the cancel of the rows the including statement's `seen` locked (id, status_before): a pending one at once (status cancelled), a claimed one by asking its holder (cancel_requested_at), each with its work.cancelled or work.cancel_requested audit entry; the one spelling for cancel_items and cancel_drawn
moved AS (
    UPDATE workqueue_workitem AS w
       SET status = CASE WHEN seen.status_before = 'pending' THEN 'cancelled' ELSE 'claimed' END,
           cancel_requested_at = now(), updated_at = now(), updated_by = {system_actor}
      FROM seen
     WHERE w.id = seen.id AND w.status = seen.status_before AND w.cancel_requested_at IS NULL
    RETURNING w.*, seen.status_before
), entries AS (
    SELECT m.org_id,
           CASE WHEN m.status = 'cancelled' THEN 'work.cancelled' ELSE 'work.cancel_requested' END
               AS action,
           'workqueue.workitem' AS subject_type, m.id::text AS subject_id,
           jsonb_build_object('kind', m.kind, 'status', m.status_before, 'attempts', m.attempts,
                              'claimed_by', m.claimed_by, 'payload', m.payload) AS data
      FROM moved m
), audited AS (
{append_entries}
