"""A site's own tables, as any Django site has them: orders, and (for the site-tenancy) teams."""

from django.conf import settings
from django.db import models


class Order(models.Model):
    number = models.CharField(max_length=20, unique=True)
    paid = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.number


class Team(models.Model):
    """The site's own tenant (the third tenancy: WORKQUEUE["TENANCY"] names shop.tenants)."""

    name = models.CharField(max_length=50)


class Seat(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    team = models.ForeignKey(Team, on_delete=models.CASCADE)
