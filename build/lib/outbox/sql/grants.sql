-- grants (outbox): the everyday login writes and reads its tenant's rows under row-level
-- security; the relay (system login) marks them relayed and purges them.
GRANT SELECT, INSERT ON workqueue_outbox_outboxrow TO {app};
