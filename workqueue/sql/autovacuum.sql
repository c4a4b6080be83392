-- autovacuum: a queue table turns over all its rows; vacuum it after 1% of them died instead of
-- PostgreSQL's default 20%, so dead entries from claims and completions do not pile up in the
-- claim's index between runs (DESIGN.md, bloat).
ALTER TABLE workqueue_workitem SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
)
