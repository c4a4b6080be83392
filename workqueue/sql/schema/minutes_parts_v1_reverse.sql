-- minutes_parts_v1_reverse: undo minutes_parts_v1: the old table, detached, takes back every minute and its rights, and is the table again.
DROP FUNCTION workqueue_minutes_drop_v1(timestamptz);
DROP FUNCTION workqueue_minutes_keep_v1(timestamptz, timestamptz);
DO $$
DECLARE
    acl record;
BEGIN
    LOCK TABLE workqueue_laneminute IN ACCESS EXCLUSIVE MODE;
    ALTER TABLE workqueue_laneminute DETACH PARTITION workqueue_laneminute_before;
    -- Every tenant's minutes, as the owner (its all-tenants policy).
    PERFORM set_config('app.all_tenants', 'on', true);
    INSERT INTO workqueue_laneminute_before SELECT * FROM workqueue_laneminute;
    FOR acl IN
        SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'workqueue_laneminute'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON workqueue_laneminute_before TO %s', acl.privilege_type,
                       CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
    END LOOP;
    PERFORM set_config('app.all_tenants', '', true);
    DROP TABLE workqueue_laneminute;
    ALTER TABLE workqueue_laneminute_before RENAME TO workqueue_laneminute;
    ALTER INDEX workqueue_laneminute_before_pkey RENAME TO workqueue_laneminute_pkey;
END
$$;
DROP TABLE workqueue_minutes_part;
