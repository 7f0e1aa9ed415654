"""REST and form fields under the input rule for numbers (retrieval.input_rules): a number sent
as text is ASCII digits (DRF's and Django's IntegerField and FloatField call int() and float(),
which read '٣' as 3 and '1_0' as 10). JSON numbers are already checked by the parser; form fields
arrive as text."""

from django import forms
from rest_framework import serializers

from .errors import InputError
from .input_rules import parse_integer, parse_real


class _AsciiText:
    """Text goes through `parse` (the input rule) before the DRF field's own conversion."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            try:
                data = self.parse(data.strip())
            except InputError:
                self.fail("invalid")
        return super().to_internal_value(data)


class AsciiIntegerField(_AsciiText, serializers.IntegerField):
    parse = staticmethod(parse_integer)


class AsciiFloatField(_AsciiText, serializers.FloatField):
    parse = staticmethod(parse_real)


class _AsciiFormText:
    """A form's text goes through `parse` (the input rule) before Django's own conversion, which
    keeps its messages ("Enter a whole number.") and its min/max validators."""

    def to_python(self, value):
        if isinstance(value, str) and value.strip() not in self.empty_values:
            try:
                self.parse(value.strip())
            except InputError:
                raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None
        return super().to_python(value)


class AsciiIntegerFormField(_AsciiFormText, forms.IntegerField):
    parse = staticmethod(parse_integer)


class AsciiFloatFormField(_AsciiFormText, forms.FloatField):
    parse = staticmethod(parse_real)
