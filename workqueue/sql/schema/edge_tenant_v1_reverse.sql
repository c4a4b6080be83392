-- edge_tenant_v1_reverse: edges are no longer checked for their items' tenant.
DROP TRIGGER workqueue_edge_tenant ON workqueue_dependency;
DROP FUNCTION workqueue_edge_tenant_v1();
