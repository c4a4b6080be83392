-- record_attempts: one attempt per row of the including statement's `ended` (org_id, id, attempts, claimed_by, claimed_at, outcome, error, traceback), ended now; the one spelling of an attempt's record, for the statements that settle a claim (the host is the worker id's first part: runworker's ids are host:pid:suffix)
INSERT INTO workqueue_attempt
       (org_id, item_id, attempt, worker, host, started_at, ended_at, outcome, error, traceback)
SELECT e.org_id, e.id, e.attempts, COALESCE(e.claimed_by, ''),
       split_part(COALESCE(e.claimed_by, ''), ':', 1), e.claimed_at, now(), e.outcome, e.error,
       e.traceback
  FROM ended e
