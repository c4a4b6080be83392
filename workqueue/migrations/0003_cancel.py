"""Cancel: the ``cancelled`` status, ``cancel_requested_at`` (when someone asked;
a claimed item's holder learns of it at its next lease renewal), and the triage index now
covering cancelled items too, so the sweep purges them like discarded ones."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("workqueue", "0002_row_level_security")]

    operations = [
        migrations.RemoveIndex(model_name="workitem", name="workitem_triage_idx"),
        migrations.AddField(
            model_name="workitem",
            name="cancel_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="workitem",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("claimed", "Claimed"),
                    ("done", "Done"),
                    ("failed", "Failed"),
                    ("discarded", "Discarded"),
                    ("cancelled", "Cancelled"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="workitem",
            index=models.Index(
                condition=models.Q(("status__in", ["failed", "discarded", "cancelled"])),
                fields=["updated_at"],
                name="workitem_triage_idx",
            ),
        ),
    ]
