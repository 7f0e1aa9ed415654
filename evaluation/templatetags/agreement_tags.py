"""`{% agreement_warning study %}`: on the staff study page, the warning the study's last agreement
check left (evaluation.alerts), linking to the report's agreement tables. One query, no
statistics: the figures were computed by the check."""

from django import template

from evaluation.alerts import watch_of, watch_payload

register = template.Library()


@register.inclusion_tag("evaluation/_agreement_warning.html")
def agreement_warning(study):
    return {"watch": watch_payload(watch_of(study)), "link": True}
