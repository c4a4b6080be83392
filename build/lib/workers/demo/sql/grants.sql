-- grants (shipment_notifier): the everyday login books and reads its tenant's shipments and
-- notices under row-level security, and changes only what a shipment's life changes.
GRANT SELECT, INSERT ON workqueue_demo_shipment, workqueue_demo_shipmentnotice TO {app};
GRANT UPDATE (status, version, notified_version, updated_at) ON workqueue_demo_shipment TO {app};
