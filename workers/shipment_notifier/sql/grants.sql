-- grants (shipment_notifier): the everyday login books and reads its tenant's shipments and
-- notices under row-level security, and changes only what a shipment's life changes.
GRANT SELECT, INSERT ON shipment_notifier_shipment, shipment_notifier_shipmentnotice TO {app};
GRANT UPDATE (status, version, notified_version, updated_at) ON shipment_notifier_shipment TO {app};
