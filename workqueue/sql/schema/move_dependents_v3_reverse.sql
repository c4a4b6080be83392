-- move_dependents_v3_reverse: drop the function that moves a parent's waiting children and gives those made pending their ready rows.
DROP FUNCTION workqueue_move_dependents_v3(uuid[], text[], integer);
