-- purge_items: delete up to batch items of the given statuses last changed before `before`, in every tenant, with their attempts (the locking subquery is the queryset workqueue/maintenance.py compiles); returns how many items
WITH doomed AS (
    {locking}
), gone AS (
    DELETE FROM workqueue_workitem AS w USING doomed WHERE w.id = doomed.id RETURNING w.id
), attempts_gone AS (
    DELETE FROM workqueue_attempt AS a USING gone WHERE a.item_id = gone.id
)
SELECT count(*) FROM gone
