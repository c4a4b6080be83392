-- grants (audit): the everyday login reads and appends its tenant's entries; nobody but the
-- owner rewrites or removes one.
GRANT SELECT, INSERT ON workqueue_audit_auditentry TO {app};
-- The erase (workqueue/erase.py) redacts entries' data through the one function that may, on the
-- system login. Only once migrated that far (create_logins runs before an upgrade's migrate).
DO $$
BEGIN
    IF to_regprocedure('workqueue_audit_redact_v1(uuid, text, text[], integer)') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION workqueue_audit_redact_v1(uuid, text, text[], integer) TO {system};
    END IF;
END
$$;
