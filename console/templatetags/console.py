"""`{% navigation %}`: the one site menu (console/navigation.py), rendered by templates/base.html.
Works without a request too (the 500 page renders with an empty context): then it shows nothing."""

from django import template

from console.navigation import navigation_for

register = template.Library()


@register.inclusion_tag("console/_navigation.html", takes_context=True)
def navigation(context):
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"links": navigation_for(user, request.path if request else "")}
