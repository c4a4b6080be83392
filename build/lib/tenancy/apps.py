from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """The orgs tenancy's orgs and memberships (WORKQUEUE["TENANCY"] = "orgs")."""

    name = "tenancy"
    label = "workqueue_tenancy"
    verbose_name = "Tenancy"
    default_auto_field = "django.db.models.BigAutoField"
