-- site_grants: what the reference site's everyday and system logins may do on Django's own
-- tables (the queue's grants on its tables come first: tenancy/grants.py). Sign-in (users,
-- groups, permissions, sessions, the admin's log) is the system login's alone
-- (tenancy.routers.SignInRouter); the everyday login reads two catalogs that name no tenant.
GRANT SELECT, INSERT, UPDATE, DELETE
   ON auth_user, auth_user_groups, auth_user_user_permissions, auth_group,
      auth_group_permissions, auth_permission, django_session, django_admin_log,
      django_content_type
   TO {system};
-- The content types are a catalog of model names (the admin looks them up): read-only.
GRANT SELECT ON django_content_type TO {app};
-- The list of applied migrations (runserver compares it with the code at start): read-only.
GRANT SELECT ON django_migrations TO {app};
