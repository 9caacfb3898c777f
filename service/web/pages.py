"""The two small HTML pages of the unsubscribe link: the question and the answer.

No JavaScript and no outside resources: one form with one button, which posts
the RFC 8058 body to the same URL. Everything shown is escaped.
"""

import html

STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; background: #f4f4f5; color: #18181b; }
main { max-width: 32rem; margin: 4rem auto; padding: 2rem; background: #fff; border-radius: 8px;
       box-shadow: 0 1px 3px rgba(0, 0, 0, .15); }
h1 { font-size: 1.5rem; margin-top: 0; }
button { font: inherit; font-weight: 600; padding: .6rem 1.4rem; border: 0; border-radius: 6px;
         background: #b91c1c; color: #fff; cursor: pointer; }
button:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 2px; }
.small { color: #52525b; font-size: .875rem; }
"""


def mask(email: str) -> str:
    """j***@example.org: enough to recognise one's own address, not to read someone else's."""
    local, at, domain = email.rpartition("@")
    if not at:
        return email[:1] + "***"
    return f"{local[:1]}***@{domain}"


def _page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="robots" content="noindex">\n<title>{html.escape(title)}</title>\n'
            f'<style>{STYLE}</style>\n</head>\n<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n')


def _whom(account: str, campaign: str | None) -> str:
    sender = f"<strong>{html.escape(account)}</strong>"
    return f"{sender} (you received “{html.escape(campaign)}”)" if campaign else sender


def question(token: str, email: str, account: str, campaign: str | None) -> str:
    return _page("Unsubscribe", f"""<h1>Unsubscribe</h1>
<p>Stop all mail from {_whom(account, campaign)} to <strong>{html.escape(mask(email))}</strong>?</p>
<form method="post" action="?token={html.escape(token)}">
<input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Unsubscribe</button>
</form>
<p class="small">Nothing changes until you press the button.</p>""")


def confirmation(email: str, account: str) -> str:
    return _page("Unsubscribed", f"""<h1 role="status">You are unsubscribed</h1>
<p><strong>{html.escape(mask(email))}</strong> will get no more mail from <strong>{html.escape(account)}</strong>.</p>
<p class="small">You can close this page.</p>""")


def problem(title: str, text: str) -> str:
    return _page(title, f"<h1>{html.escape(title)}</h1>\n<p>{html.escape(text)}</p>")
