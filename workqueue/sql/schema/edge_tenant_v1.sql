-- edge_tenant_v1: an edge joins two items of the tenant it is written in, checked by the statement that writes it. Row-level
-- security lets a tenant write an edge in its own name only, but not that the items it names are its own: without this, tenant
-- B could store an edge from an item of its own to tenant A's waiting step. Run after the whole statement (its transition
-- table), so the steps a declaration inserts beside their edges are seen; as its caller, whose tenant's items are all it
-- may see, and by org_id too, for a login that sees every tenant.
CREATE FUNCTION workqueue_edge_tenant_v1() RETURNS trigger LANGUAGE plpgsql
    SET search_path = pg_catalog, public
    AS $$
DECLARE
    stray record;
BEGIN
    SELECT e.parent_id, e.child_id, e.org_id INTO stray
      FROM added e
     WHERE NOT EXISTS (SELECT FROM workqueue_workitem w WHERE w.id = e.parent_id AND w.org_id = e.org_id)
        OR NOT EXISTS (SELECT FROM workqueue_workitem w WHERE w.id = e.child_id AND w.org_id = e.org_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = 'foreign_key_violation',
            MESSAGE = format('an edge must join two items of the tenant it is written in: %s after %s is not both of tenant %s',
                             stray.child_id, stray.parent_id, stray.org_id),
            HINT = 'declare a workflow step after items of its own tenant only';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER workqueue_edge_tenant AFTER INSERT ON workqueue_dependency
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION workqueue_edge_tenant_v1();
