-- grants (audit): the everyday login reads and appends its tenant's entries; nobody but the
-- owner rewrites or removes one.
GRANT SELECT, INSERT ON workqueue_audit_auditentry TO {app};
