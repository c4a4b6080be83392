-- move_dependents_v2_reverse: drop the function that moves a parent's waiting children.
DROP FUNCTION workqueue_move_dependents_v2(uuid[], text[], integer);
