-- history_share_v2: a history child's only rights are the mover's (SELECT, INSERT for each login that may DELETE from the child's parent: the sweep's system login); every other reader reaches history through the parent, whose rights alone PostgreSQL checks there. v1 copied the parent's rights, so the everyday login could INSERT into a child by name, outside the hot table's unique key (a row with another tenant's item id).
CREATE OR REPLACE FUNCTION workqueue_history_share_v1(p_parent regclass DEFAULT NULL) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
    AS $$
DECLARE
    kid record;
    acl record;
    shared integer := 0;
BEGIN
    FOR kid IN
        SELECT i.inhrelid::regclass AS child, i.inhparent::regclass AS parent
          FROM pg_inherits i
         WHERE i.inhparent IN (SELECT 'workqueue_workitem'::regclass
                               UNION ALL
                               SELECT to_regclass(quote_ident(f.relname)) FROM workqueue_history_follower f)
           AND (p_parent IS NULL OR i.inhparent = p_parent)
    LOOP
        FOR acl IN
            SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) AS a
             WHERE c.oid = kid.child AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('REVOKE ALL ON %s FROM %s', kid.child,
                           CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
        END LOOP;
        FOR acl IN
            SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) AS a
             WHERE c.oid = kid.parent AND a.grantee <> c.relowner AND a.grantee <> 0 AND a.privilege_type = 'DELETE'
        LOOP
            EXECUTE format('GRANT SELECT, INSERT ON %s TO %s', kid.child, quote_ident(pg_get_userbyid(acl.grantee)));
        END LOOP;
        shared := shared + 1;
    END LOOP;
    RETURN shared;
END
$$;
SELECT workqueue_history_share_v1();
