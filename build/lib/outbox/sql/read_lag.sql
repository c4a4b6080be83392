-- read_lag: seconds the oldest pending outbox row has waited, across tenants (0 when none waits), and how many wait
SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_s, count(*) AS pending
  FROM workqueue_outbox_outboxrow
 WHERE status = 'pending'
