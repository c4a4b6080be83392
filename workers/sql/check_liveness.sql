-- check_liveness: answer on the worker's liveness session: an answer proves the session (and the lock it holds) still lives
SELECT 1
