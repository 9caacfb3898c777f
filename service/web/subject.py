"""The subject a subscriber saw, for the unsubscribe page.

A subject without template syntax is shown as it is. One with template syntax is rendered for the
subscriber the link names, as the sender rendered it (service/mail/render.py): in the campaign
templates' sandbox, on its budget of steps, in a worker thread (a template may take a while), at most
`limiter` allows (RENDERS at a time), each with a sandbox of its own (a sandbox counts one message's budget at a time).
When it cannot be rendered for this subscriber the page leaves the subject out. Nothing is shown that
the message holding the link did not show: only that message carried its token.
"""

from collections.abc import Mapping

import anyio

from service.mail import templates
from service.mail.render import clean
from service.mail.sandbox import Sandbox

RENDERS = 2  # subjects rendered at once, for all requests (the limiter the app makes)
MAX_SHOWN = 300  # characters of a subject shown


def _shown(text: str) -> str | None:
    text = " ".join(clean(text).split())
    if not text:
        return None
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _render(subject: str, variables: Mapping) -> str | None:
    env = Sandbox(html=False)
    try:
        piece = templates.piece(env, subject)
        if piece.__class__ is str:
            return _shown(piece.format_map(variables))
        return _shown(templates.run(piece, templates.context(env, variables)))
    except Exception:  # whatever the operator's template does with this data: no subject shown
        return None


async def rendered(
    subject: str,
    campaign_id: int,
    campaign_name: str,
    name: str | None,
    email: str,
    attributes: str | Mapping | None,
    unsubscribe_url: str,
    limiter: anyio.CapacityLimiter,
) -> str | None:
    """The campaign's `subject` as this subscriber's message carried it (None: it cannot be rendered)."""
    subject = clean(subject)
    if "{" not in subject:
        return _shown(subject)
    try:
        variables = {
            "name": clean(name or "").strip(),
            "email": email,
            "unsubscribe_url": unsubscribe_url,
            "attributes": templates.attributes(attributes),
            "campaign": {"id": campaign_id, "name": templates.line_breaks(campaign_name)},
        }
    except ValueError:  # attributes that are not JSON
        return None
    return await anyio.to_thread.run_sync(_render, subject, variables, limiter=limiter)
