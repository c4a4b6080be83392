-- redact_v1: the one way an audit entry changes: its data replaced by {"redacted": true}, its skeleton (tenant, actor, action, subject, request, time) kept; for erasing a tenant or one person's data (workqueue/erase.py). Up to p_batch entries of p_org (only those of p_subject_type and p_subject_ids when given) not yet redacted, rows another transaction holds skipped; returns how many. Owned by the owner, executable by the system login alone: neither login may UPDATE the trail. It runs as the owner, whom row-level security binds too (FORCE) unless app.all_tenants names every tenant (the owner's policy, tenancy/sql/tenant_policy.sql): set for the call only (a function's SET clause may not name it unless a superuser made it), and the statement names its tenant itself.
CREATE FUNCTION workqueue_audit_redact_v1(p_org uuid, p_subject_type text, p_subject_ids text[], p_batch integer)
    RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    redacted integer;
    was text := current_setting('app.all_tenants', true);
BEGIN
    IF p_org IS NULL OR p_batch IS NULL OR p_batch < 1 THEN
        RAISE EXCEPTION 'workqueue_audit_redact_v1: a tenant and a batch of at least 1 are required';
    END IF;
    PERFORM set_config('app.all_tenants', 'on', true);
    WITH doomed AS (
        SELECT e.id FROM workqueue_audit_auditentry e
         WHERE e.org_id = p_org
           AND (p_subject_type IS NULL OR (e.subject_type = p_subject_type AND e.subject_id = ANY(p_subject_ids)))
           AND e.data IS DISTINCT FROM '{"redacted": true}'::jsonb
         LIMIT p_batch FOR UPDATE SKIP LOCKED
    )
    UPDATE workqueue_audit_auditentry e SET data = '{"redacted": true}'::jsonb
      FROM doomed WHERE e.id = doomed.id;
    GET DIAGNOSTICS redacted = ROW_COUNT;
    PERFORM set_config('app.all_tenants', coalesce(was, ''), true);
    RETURN redacted;
END
$$;
REVOKE ALL ON FUNCTION workqueue_audit_redact_v1(uuid, text, text[], integer) FROM PUBLIC;
