-- count_unredacted: how many of the tenant's audit entries still carry their data (not yet redacted)
SELECT count(*) FROM workqueue_audit_auditentry
 WHERE org_id = %(org_id)s::uuid AND data IS DISTINCT FROM '{"redacted": true}'::jsonb
