"""API tokens end with the password that obtained them: a token copied into a script or a leaked
log must not outlive the password change that was meant to shut it out (sessions already do:
Django signs each with the password hash). Connected when the app is ready
(IntegrationsConfig.ready), for every way a password is set: the admin, the password forms,
`changepassword`, set_password() in code. Django's rehash of a password on sign-in after a
hasher upgrade is a change of the stored hash too, and ends the token the same way."""

from django.contrib.auth import get_user_model
from django.db.models.signals import pre_save
from django.dispatch import receiver
from rest_framework.authtoken.models import Token

User = get_user_model()


@receiver(pre_save, sender=User, dispatch_uid="integrations.revoke_tokens_on_password_change")
def revoke_tokens_on_password_change(sender, instance, update_fields=None, **kwargs) -> None:
    if instance.pk is None or (update_fields is not None and "password" not in update_fields):
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if stored is not None and stored != instance.password:
        Token.objects.filter(user_id=instance.pk).delete()
