-- move_dependents_v1_reverse: drop the function that moves a parent's waiting children.
DROP FUNCTION workqueue_move_dependents_v1(uuid[], text[], integer);
