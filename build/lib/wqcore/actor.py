"""Who signs a write: an actor is text, the site's user's primary key (``str(user.pk)``, whatever
the user model and the type of its key), or ``SYSTEM_ACTOR``.

``SYSTEM_ACTOR`` signs the queue's own bookkeeping (every write after the enqueue: claims,
completions, retries, the sweep) and the work no person owns. It is spelled here only: a
statement says ``{system_actor}`` where it signs (``wqcore.statements``), Python code names this
constant (``tenancy.contexts`` offers it to callers).
"""

# Parentheses: no primary key written as text reads like it.
SYSTEM_ACTOR = "(system)"
