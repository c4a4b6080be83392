"""The site's own tenancy: a request's tenant is its user's team."""

from shop.models import Seat


def team_of(request):  # type: ignore[no-untyped-def]
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    seat = Seat.objects.filter(user=user).select_related("team").first()
    return seat.team if seat else None
