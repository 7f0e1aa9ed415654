"""`{% navigation %}`: the one site menu (console/navigation.py), rendered by templates/base.html.
Works without a request too (the 500 page renders with an empty context): then it shows nothing.
`|without_server_folders`: a path of the server by its last name only (retrieval.wording)."""

from django import template

from console.navigation import navigation_for
from retrieval.wording import without_server_folders

register = template.Library()
register.filter("without_server_folders", without_server_folders)


@register.inclusion_tag("console/_navigation.html", takes_context=True)
def navigation(context):
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"links": navigation_for(user, request.path if request else "")}
