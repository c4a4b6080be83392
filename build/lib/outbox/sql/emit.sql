-- emit: write one pending outbox row in the tenant this statement names for its own transaction (in the caller's transaction when there is one), and announce it on outbox_pending (delivered at commit)
WITH tenant AS MATERIALIZED (
    SELECT {set_tenant}
), inserted AS (
    INSERT INTO workqueue_outbox_outboxrow (
        id, org_id, kind, payload, actor, request_id, traceparent, status, last_error,
        created_at, relayed_at)
    SELECT %(id)s::uuid, %(org_id)s::uuid, %(kind)s::text, %(payload)s::jsonb,
           %(actor)s::text, %(request_id)s::uuid, %(traceparent)s::text, 'pending', '',
           now(), NULL
      FROM tenant
    RETURNING id
), announced AS (
    SELECT pg_notify('outbox_pending', '') FROM inserted
)
SELECT id FROM inserted, (SELECT count(*) FROM announced) AS a
