"""A workflow's steps as declared (the items and their edges are ``workqueue.models``')."""

from __future__ import annotations

from django.db import models


class Callback(models.TextChoices):
    # Starts once every member of its group is done (a dead member holds it).
    ON_SUCCESS = "on_success", "On success"
    # Starts once every member of its group has finished, however.
    ON_COMPLETE = "on_complete", "On complete"


class WorkflowStep(models.Model):
    """A step of a workflow, as declared: its place among the declaration's steps and, for a
    group's callback, which one it is. Written with the step by the declaration's statement,
    never changed, purged with its item: what finds every step of a workflow however it ended
    (the items' workflow index leaves done steps out, so that a step's completion costs no index
    entry more than a plain item's). No foreign key, as for the edges."""

    # Its first column finds a workflow's steps, page by page in id order; both, one step to
    # purge with its item.
    pk = models.CompositePrimaryKey("workflow_id", "item_id")
    org_id = models.UUIDField()
    workflow_id = models.UUIDField()
    item_id = models.UUIDField()
    # Its index among the declaration's steps (``steps[3]``); None for a step declared before
    # this table was (migration 0013), whose place was not kept.
    place = models.IntegerField(null=True, blank=True)
    # Which callback of its group it is; None for any other step.
    callback = models.CharField(max_length=12, choices=Callback.choices, null=True, blank=True)

    class Meta:
        indexes = [
            # A workflow's callbacks, a few among thousands of steps.
            models.Index(
                fields=["workflow_id"],
                condition=models.Q(callback__isnull=False),
                name="workflowstep_callback_idx",
            )
        ]

    def __str__(self) -> str:
        return f"{self.item_id} in {self.workflow_id}"
