-- emit_citus: emit's Citus form (WORKQUEUE['CITUS']): write one pending outbox row in the tenant the transaction names (SET LOCAL, before it), one row of values Citus sends to the tenant's node, and announce it on outbox_pending from the coordinator (delivered at commit)
-- emit's own statement cannot be sent: Citus inserts the rows of its SELECT from a CTE by COPY, which row-level
-- security refuses, and a statement's own set_config never reaches the workers.
WITH inserted AS (
    INSERT INTO workqueue_outbox_outboxrow (
        id, org_id, kind, payload, actor, request_id, traceparent, status, last_error,
        created_at, relayed_at)
    VALUES (%(id)s::uuid, %(org_id)s::uuid, %(kind)s::text, %(payload)s::jsonb,
            %(actor)s::text, %(request_id)s::uuid, %(traceparent)s::text, 'pending', '',
            now(), NULL)
    RETURNING id
)
SELECT id, pg_notify('outbox_pending', '')::text AS announced FROM inserted
