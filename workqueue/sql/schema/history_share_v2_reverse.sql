-- history_share_v2_reverse: undo history_share_v2 (the children take the parent's rights again).
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
            SELECT a.grantee, a.privilege_type FROM pg_class c, aclexplode(c.relacl) AS a
             WHERE c.oid = kid.parent AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('GRANT %s ON %s TO %s', acl.privilege_type, kid.child,
                           CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(acl.grantee)) END);
        END LOOP;
        shared := shared + 1;
    END LOOP;
    RETURN shared;
END
$$;
SELECT workqueue_history_share_v1();
