-- minutes_parts_v1_reverse: undo minutes_parts_v1: every day's minutes into one plain table again, with the table's rights (the migration's first step, unapplied last, gives it the tenant policy).
DROP FUNCTION workqueue_minutes_drop_v1(timestamptz);
DROP FUNCTION workqueue_minutes_keep_v1(timestamptz, timestamptz);
DO $$
DECLARE
    acl record;
BEGIN
    LOCK TABLE workqueue_laneminute IN ACCESS EXCLUSIVE MODE;
    CREATE TABLE workqueue_laneminute_plain (LIKE workqueue_laneminute INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
    INSERT INTO workqueue_laneminute_plain SELECT * FROM workqueue_laneminute;
    FOR acl IN
        SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) AS a
         WHERE c.oid = 'workqueue_laneminute'::regclass AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON workqueue_laneminute_plain TO %s', acl.privilege_type,
                       CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
    END LOOP;
    DROP TABLE workqueue_laneminute;
    ALTER TABLE workqueue_laneminute_plain RENAME TO workqueue_laneminute;
    ALTER TABLE workqueue_laneminute ADD CONSTRAINT workqueue_laneminute_pkey PRIMARY KEY (minute, org_id, lane);
END
$$;
DROP TABLE workqueue_minutes_part;
