-- redact_entries: redact up to batch of the tenant's audit entries not yet redacted (only those of subject_type and subject_ids when given): their data replaced by {"redacted": true}, who, what and when kept; returns how many
SELECT workqueue_audit_redact_v1(%(org_id)s::uuid, %(subject_type)s::text, %(subject_ids)s::text[], %(batch)s::integer)
