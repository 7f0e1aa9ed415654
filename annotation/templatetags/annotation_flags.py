"""`{% item_flags study %}`: the staff table of flags annotators raised on a study's items, so any
staff page can show it with one line (it reads them itself through selectors.item_flags)."""

from django import template

from ..selectors import item_flags as study_item_flags

register = template.Library()


@register.inclusion_tag("annotation/_item_flags.html")
def item_flags(study) -> dict:
    return {"flags": study_item_flags(study)}
