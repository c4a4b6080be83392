-- read_pauses: every paused lane and kind, by lane then kind (the gauges page, /metrics, manage.py queue paused)
SELECT lane, kind, paused_by, reason, paused_at FROM workqueue_pause ORDER BY lane, kind
