-- forget_ready: forget the ready rows of the including statement's `moved` items that it took out of pending (status_before pending, status now another: a cancel, a discard), by workqueue_ready_forget (which deletes only rows of items no longer pending, passing over those a claim holds); nothing at all when none was pending; the one spelling for the statements that end a pending item
forgotten AS (
    SELECT workqueue_ready_forget(array_agg(m.id)) AS rows
      FROM moved m
     WHERE m.status_before = 'pending' AND m.status <> 'pending'
    HAVING count(*) > 0
)
