"""The mail subject's section of the settings: what making, previewing and checking a message needs of the
environment, read once from Settings (service/settings.py, the one place that reads the environment).

The subjects that compile a campaign (service/mail/render.py), judge its From (service/mail/from_rule.py),
preview, create or approve it, queue a message or a list's confirmation take a Mailing rather than the
whole Settings; a surface builds it once (the API when it is made, a command when it starts)."""

from dataclasses import dataclass

from pydantic import SecretStr

from service.settings import Settings


@dataclass(frozen=True)
class Mailing:
    """Each field as Settings names it (docs/reference/settings.md)."""

    default_from_domains: tuple[str, ...] = ()  # EINMAL_FROM_DOMAINS, in their key form
    message_id_domain: str | None = None
    unsubscribe_url: str | None = None
    unsubscribe_secret: SecretStr | None = None  # also signs the confirmation links
    unsubscribe_mailto: str | None = None
    confirm_url: str | None = None
    optin_from: str | None = None
    return_path: str | None = None
    return_path_secret: SecretStr | None = None
    dkim_domain: str | None = None
    dkim_selectors: tuple[str, ...] = ()  # selector i signs with key file i
    dkim_key_files: tuple[str, ...] = ()
    click_url: str | None = None  # where tracked links lead (service/mail/clicks.py)

    @classmethod
    def of(cls, settings: Settings) -> "Mailing":
        return cls(
            default_from_domains=settings.default_from_domains,
            message_id_domain=settings.message_id_domain,
            unsubscribe_url=settings.unsubscribe_url,
            unsubscribe_secret=settings.unsubscribe_secret,
            unsubscribe_mailto=settings.unsubscribe_mailto,
            confirm_url=settings.confirm_url,
            optin_from=settings.optin_from,
            return_path=settings.return_path,
            return_path_secret=settings.return_path_secret,
            dkim_domain=settings.dkim_domain,
            dkim_selectors=settings.dkim_selectors,
            dkim_key_files=settings.dkim_key_files,
            click_url=settings.click_url,
        )
