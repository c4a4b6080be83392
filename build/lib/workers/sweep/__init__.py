"""The sweep: the queue's maintenance, one idempotent, bounded step per module.

A pass runs the steps in order (``STEPS``), each wrapped: a step that fails is logged once and
the pass goes on to the next. One sweeper acts at a time across hosts: a pass holds the
sweep's mutex (a row only the system login may lock, ``workqueue.models.Mutex``), and a pass
that cannot take it skips (at debug level). ``manage.py sweep`` runs passes on a timer
(``--once``: one pass); ``runworker`` runs them too unless ``WORKER_SWEEP=false``.
"""
