"""Template filters for texts whose characters the annotator marks spans in."""

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def exact_text(text: str) -> str:
    """The text escaped so that the browser's DOM holds exactly the stored characters: HTML
    parsing turns a carriage return into a line feed (changing "\\r\\n" into "\\n" and so every
    later offset), but keeps one written as a character reference."""
    return mark_safe(escape(text).replace("\r", "&#13;"))
