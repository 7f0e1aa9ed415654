"""A page that queues work while the task queue cannot be reached answers 503 with the one-line
reason (templates/503.html), whichever view it was: pages that show the refusal in their own
layout catch BrokerUnavailable themselves (the upload form beside its fields, the study report
page with what to start), and this is the rest (any future page that queues work). The REST API
has its own translation (retrieval.api's handler)."""

from django.shortcuts import render

from .errors import BrokerUnavailable


class BrokerUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, BrokerUnavailable):
            return render(request, "503.html", {"reason": str(exception)}, status=503)
        return None
