-- grants: what the everyday and system logins may do; only the owner changes the schema.
-- Everything is taken away first, then each app's sql/grants.sql grants the everyday login
-- exactly what its tables need (project/grants.py), so a table nobody granted stays closed.
GRANT USAGE ON SCHEMA public TO {app}, {system};
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {app}, {system};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {app}, {system};
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC, {app}, {system};
-- The system login serves the named tenant-less operations (claim, sweep, gauges, relay,
-- sign-in): it reads and writes rows of every table, but never rewrites history.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {system};
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {system};
REVOKE UPDATE, DELETE ON audit_auditentry FROM {system};
-- The content types are a catalog of model names (the admin looks them up): global, read-only.
GRANT SELECT ON django_content_type TO {app};
-- The list of applied migrations (runserver compares it with the code at start): global,
-- read-only, and it names no tenant.
GRANT SELECT ON django_migrations TO {app};
