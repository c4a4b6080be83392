-- drain_worker: ask a running worker to drain (state 'draining': its next heartbeat's publish keeps the state and reads it back, and the worker stops claiming, finishes what it holds within its grace period and goes offline, as at a first SIGTERM), with an audit entry naming the operator under the site's own tenant id; a worker not running (draining already, offline, gone) is left as it is and nothing is audited
WITH changed AS (
    UPDATE workqueue_workers_worker AS w
       SET state = 'draining'
     WHERE w.id = %(worker_id)s::text AND w.state = 'running'
    RETURNING w.id, w.host, w.pid, w.kind, w.lane, w.last_beat_at
), entries AS (
    SELECT %(site_org_id)s::uuid AS org_id, 'worker.drain_requested' AS action,
           'workqueue_workers.worker' AS subject_type, c.id AS subject_id,
           jsonb_build_object('host', c.host, 'pid', c.pid, 'kinds', c.kind, 'lane', c.lane,
                              'last_beat_at', c.last_beat_at, 'via', %(via)s::text) AS data
      FROM changed c
), audited AS (
{append_entries}
)
SELECT id FROM changed
