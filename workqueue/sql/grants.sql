-- grants (workqueue): the everyday login enqueues and reads its tenant's items, and changes
-- only the columns the transitions own; never an item's id, tenant, kind, author or key. No
-- DELETE and no table-wide UPDATE: without them it cannot LOCK the queue table in a mode that
-- stalls other tenants (LOCK beyond ROW EXCLUSIVE needs table-level UPDATE, DELETE or TRUNCATE).
GRANT SELECT, INSERT ON workqueue_workitem TO {app};
GRANT UPDATE (status, available_at, claimed_by, claim_token, lease_expires_at, attempts,
              last_error, payload, cancel_requested_at, result, updated_at, updated_by, waiting_on,
              has_dependents, ringed_at)
   ON workqueue_workitem TO {app};
-- The ready ring: the statements that make an item pending write its ready row under the
-- tenant; only the claim (system login) deletes one, and workqueue_ready_forget the rows of
-- items a tenant ended while pending. No DELETE (it would let the login LOCK the ring, stalling
-- every claim), and no right on the partitions themselves (read and written through the table).
GRANT SELECT, INSERT ON workqueue_ready TO {app};
-- The rotation empties the ring's partitions (TRUNCATE, after moving what they still hold) on
-- the system login.
GRANT SELECT, INSERT, DELETE, TRUNCATE
   ON workqueue_ready_later, workqueue_ready_1, workqueue_ready_2, workqueue_ready_3,
      workqueue_ready_4
   TO {system};
-- A tenant reads its own share of the queue; the operator sets shares (system login).
GRANT SELECT ON workqueue_tenantshare TO {app};
-- The enqueue API's stored responses: a request claims its Idempotency-Key (insert) and
-- completes it with its answer (update of the answer only); the sweep purges them.
GRANT SELECT, INSERT ON workqueue_storedresponse TO {app};
GRANT UPDATE (status_code, body) ON workqueue_storedresponse TO {app};
-- Attempts: the settle statements that run under the tenant (fail, the sweep's requeue of an
-- expired lease) record the attempt they end; its record is never changed (no UPDATE, no
-- DELETE: the purge, on the system login, deletes it with its item).
GRANT SELECT, INSERT ON workqueue_attempt TO {app};
-- Workflow edges: a declaration inserts them with its steps (and marks an existing parent as one:
-- has_dependents, above); the statements that end an item read them. An edge never changes (the
-- purge, on the system login, deletes it with its item).
GRANT SELECT, INSERT ON workqueue_dependency TO {app};
-- A workflow's steps as declared: written by its declaration beside the steps, read by its
-- admin page; never changed (the purge, on the system login, deletes each with its item).
GRANT SELECT, INSERT ON workqueue_workflowstep TO {app};
-- The gauges page's minutes: a tenant's staff read their tenant's (row-level security); the sweep
-- writes and purges them on the system login. The rollup's place is the system login's only.
GRANT SELECT ON workqueue_laneminute TO {app};
-- The same per kind (oldest waiting, run times): read by a tenant's staff, written by the sweep.
DO $$
BEGIN
    IF to_regclass('workqueue_kindminute') IS NOT NULL THEN
        GRANT SELECT ON workqueue_kindminute TO {app};
    END IF;
END
$$;
-- History (sql/schema/history_v1.sql): the sweep makes its children, moves done items into them
-- and drops them, on the system login, through the functions that own the work. A child takes
-- the item table's rights when made; taken again here, after the item table's changed above.
-- Only once migrated that far: create_logins runs before an upgrade's migrate, and the grants run
-- again after it.
DO $$
BEGIN
    IF to_regclass('workqueue_history_span') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION workqueue_history_keep_v1(timestamptz, timestamptz, float8),
                                  workqueue_history_move_v1(timestamptz, timestamptz, integer),
                                  workqueue_history_drop_v1(timestamptz)
           TO {system};
        GRANT SELECT ON workqueue_history_span, workqueue_history_follower TO {system};
    END IF;
    -- The timed tables (sql/schema/history_timed_v1.sql), once migrated that far.
    IF to_regclass('workqueue_history_timed') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION workqueue_history_move_timed_v1(name, timestamptz, timestamptz, integer),
                                  workqueue_history_drop_v2(timestamptz, name[], timestamptz[])
           TO {system};
        GRANT SELECT ON workqueue_history_timed TO {system};
    END IF;
    IF to_regclass('workqueue_history_span') IS NOT NULL THEN
        PERFORM workqueue_history_share_v1();
    END IF;
END
$$;
-- The gauges page's minutes, one partition a day (sql/schema/minutes_parts_v1.sql): the sweep makes and drops the days
-- on the system login, through the functions that own the work. Only once migrated that far.
DO $$
BEGIN
    IF to_regclass('workqueue_minutes_part') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION workqueue_minutes_keep_v1(timestamptz, timestamptz),
                                  workqueue_minutes_drop_v1(timestamptz)
           TO {system};
    END IF;
    IF to_regclass('workqueue_kindminute') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION workqueue_minutes_keep_v2(timestamptz, timestamptz),
                                  workqueue_minutes_drop_v2(timestamptz)
           TO {system};
    END IF;
END
$$;
