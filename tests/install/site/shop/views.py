"""The site's views: an order and its receipt's work item in the request's one transaction; a
report by the site's @task, and its result."""

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from shop.models import Order
from shop.tasks import order_count
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


@csrf_exempt
def report(request: HttpRequest) -> JsonResponse:
    """Enqueues the site's @task for the signed-in member's tenant (the backend's)."""
    result = order_count.enqueue(request.POST["prefix"])
    return JsonResponse({"task": result.id, "api": type(result).__module__})


def report_result(request: HttpRequest, task_id: str) -> JsonResponse:
    result = order_count.get_result(task_id)
    return JsonResponse({"status": result.status, "value": result.return_value})
