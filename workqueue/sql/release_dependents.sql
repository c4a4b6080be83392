-- release_dependents: meet the edges of the items the including statement ended (its `ended_items`: id, has_dependents), as workqueue_release_dependents_v1 does (sql/schema/, migration 0007), `done` saying whether they ended done; only items that are some item's parent, and not at all when none is, so ending a plain item costs nothing more; the one spelling of what ending an item does to the items that wait for it
-- The aggregate reads every row of `ended_items` first: the function runs once the including statement has locked and
-- changed them all (it sees those changes, and, in its own snapshot, edges declared while it waited for their locks).
released AS (
    SELECT workqueue_release_dependents_v1(array_agg(e.id), {done}) AS pending
      FROM ended_items AS e
     WHERE e.has_dependents
    HAVING count(*) > 0
)
