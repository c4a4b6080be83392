-- purge_items: delete up to batch items of the given statuses last changed before `before`, in every tenant (the locking subquery is the queryset workqueue/maintenance.py compiles); returns how many
WITH doomed AS (
    {locking}
), gone AS (
    DELETE FROM workqueue_workitem AS w USING doomed WHERE w.id = doomed.id RETURNING 1
)
SELECT count(*) FROM gone
