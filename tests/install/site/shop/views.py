"""The site's views: an order and its receipt's work item in the request's one transaction."""

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from shop.models import Order
from workqueue import api


@csrf_exempt
def checkout(request: HttpRequest) -> JsonResponse:
    number = request.POST["number"]
    with transaction.atomic():
        if number != "bad":
            Order.objects.create(number=number)
        item, _ = api.enqueue(request.op, "SHOP_SEND_RECEIPT", {"order": number})
        if request.POST.get("then") == "fail":
            raise RuntimeError("the view fails after enqueueing: nothing may stay")
    return JsonResponse({"item": str(item.id)})
