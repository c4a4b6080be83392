-- ready_v2_reverse: drop version 2 of the ring's rotation (version 1 stays).
DROP FUNCTION workqueue_rotate_ready_v2(bigint, integer, integer, integer);
