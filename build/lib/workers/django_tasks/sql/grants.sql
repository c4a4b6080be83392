-- grants (djtasks): the everyday login reads its tenant's task records (get_result), under
-- row-level security; only the worker writes them, on the system login, fenced by the item's
-- claim token (record_start, record_end).
GRANT SELECT ON workqueue_tasks_taskrecord TO {app};
