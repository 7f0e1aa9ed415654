"""The REST API's JSON parser: request bodies follow the same input rules as files
(retrieval.input_rules): at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes (Django checks that only for
`request.body`, which DRF's stream bypasses), nesting and number sizes bounded before and during
parsing, no NUL or lone surrogate, no key given twice in one object (the importers' rule), a
UTF-8 BOM accepted. A refusal is a 400 with one line naming the field."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .errors import InputError
from .input_rules import load_json, refuse_repeated_keys


class GuardedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        if encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
            encoding = "utf-8-sig"
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        data = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise ParseError(f"JSON parse error - the body is larger than {limit} bytes")
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding} text") from exc
        try:
            return load_json(text, object_pairs_hook=refuse_repeated_keys())
        except InputError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
