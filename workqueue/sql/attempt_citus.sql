-- attempt_citus: record_attempts' Citus form: the attempt a settle just ended (its row as record_attempts writes it), one row of values Citus sends to the tenant's node; sent in the settle's transaction after its Citus form changed the item
INSERT INTO workqueue_attempt
       (org_id, item_id, attempt, worker, host, started_at, ended_at, outcome, error, traceback)
VALUES (%(org_id)s::uuid, %(id)s::uuid, %(attempt)s::int, %(worker)s::text,
        split_part(%(worker)s::text, ':', 1), %(started_at)s::timestamptz, now(),
        %(outcome)s::text, %(error)s::text, %(traceback)s::text)
