-- ask_worker: ask a worker to drain (state 'draining', from 'running': it stops claiming, finishes what it holds within its grace period and goes offline, as at a first SIGTERM) or to stop now (state 'stopping', from 'running' or 'draining': it cancels what it runs and releases it, as at a second SIGTERM); its next heartbeat's publish keeps the state and reads it back. One audit entry (action) naming the operator under the site's own tenant id; a worker in none of from_states (asked already, offline, gone) is left as it is and nothing is audited
WITH changed AS (
    UPDATE workqueue_workers_worker AS w
       SET state = %(state)s::text
     WHERE w.id = %(worker_id)s::text AND w.state = ANY(%(from_states)s::text[])
    RETURNING w.id, w.host, w.pid, w.kind, w.lane, w.last_beat_at
), entries AS (
    SELECT %(site_org_id)s::uuid AS org_id, %(action)s::text AS action,
           'workqueue_workers.worker' AS subject_type, c.id AS subject_id,
           jsonb_build_object('host', c.host, 'pid', c.pid, 'kinds', c.kind, 'lane', c.lane,
                              'last_beat_at', c.last_beat_at, 'via', %(via)s::text) AS data
      FROM changed c
), audited AS (
{append_entries}
)
SELECT id FROM changed
