"""Vacuum the queue table early. The SQL is frozen here, as applied: a change is a new
migration."""

from django.db import migrations

FORWARD = """
-- autovacuum: a queue table turns over all its rows; vacuum it after 1% of them died instead of
-- PostgreSQL's default 20%, so dead entries from claims and completions do not pile up in the
-- claim's index between runs (DESIGN.md, bloat).
ALTER TABLE workqueue_workitem SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02
)
"""

REVERSE = """
-- autovacuum_reverse: back to the server's defaults.
ALTER TABLE workqueue_workitem RESET (
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor
)
"""


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0004_item_ids_time_ordered")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=REVERSE)]
