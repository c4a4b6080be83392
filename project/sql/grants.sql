-- grants: the everyday and system logins read and write rows; only the owner changes the schema.
GRANT USAGE ON SCHEMA public TO {app}, {system};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {app}, {system};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {app}, {system};
-- audit entries are append-only: nobody but the owner rewrites or removes history.
REVOKE UPDATE, DELETE, TRUNCATE ON audit_auditentry FROM {app}, {system};
