-- workflow_steps_v1_reverse: undo workflow_steps_v1 (its rows go with the table, dropped next).
SELECT set_config('app.all_tenants', 'on', true);
DELETE FROM workqueue_workflowstep WHERE place IS NULL;
