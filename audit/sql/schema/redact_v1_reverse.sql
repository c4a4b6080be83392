-- redact_v1_reverse: undo redact_v1 (entries redacted stay redacted).
DROP FUNCTION workqueue_audit_redact_v1(uuid, text, text[], integer);
