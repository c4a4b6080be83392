-- release_dependents_v1_reverse: drop the function that meets a parent's edges.
DROP FUNCTION workqueue_release_dependents_v1(uuid[], boolean);
