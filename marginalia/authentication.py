"""API tokens that expire: a token older than MARGINALIA_TOKEN_DAYS (settings.TOKEN_MAX_AGE) is
refused, so a token copied into a script or a leaked log stops working on its own. Staff issue a
fresh one with `manage.py drf_create_token -r USERNAME` (or in /admin/)."""

from django.conf import settings
from django.utils import timezone
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed


class ExpiringTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        user, token = super().authenticate_credentials(key)
        if token.created < timezone.now() - settings.TOKEN_MAX_AGE:
            raise AuthenticationFailed("The token has expired; ask staff for a new one.")
        return user, token
