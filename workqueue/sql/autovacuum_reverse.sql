-- autovacuum_reverse: back to the server's defaults.
ALTER TABLE workqueue_workitem RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor
)
