-- read_holders: who holds claimed items (by claimed_by), how many, and the soonest lease to run out, in every tenant the login sees (workitem_stale_idx holds only claimed rows)
SELECT claimed_by, count(*), min(lease_expires_at)
  FROM workqueue_workitem
 WHERE status = 'claimed'
 GROUP BY claimed_by
 ORDER BY count(*) DESC, claimed_by
 LIMIT %(limit)s
