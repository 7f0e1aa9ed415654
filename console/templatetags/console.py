"""`{% navigation %}`: the one site menu (console/navigation.py), rendered by templates/base.html.
Works without a request too (the 500 page renders with an empty context): then it shows nothing.
`|without_server_folders`: a path of the server relative to the data folder, or by its last
name only (retrieval.wording)."""

from django import template
from django.conf import settings

from console.navigation import navigation_for
from retrieval.wording import without_server_folders as _without_server_folders

register = template.Library()


@register.filter
def without_server_folders(location: str) -> str:
    return _without_server_folders(location, str(settings.MARGINALIA_DATA_DIR))


@register.inclusion_tag("console/_navigation.html", takes_context=True)
def navigation(context):
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"links": navigation_for(user, request.path if request else "")}
