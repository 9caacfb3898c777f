"""Message rendering: a campaign compiled once, each recipient's message joined from bytes.

Templates are Jinja2 in a sandbox (service/mail/templates.py): ``{{ name }}``, ``{{ email }}``,
``{{ unsubscribe_url }}``, ``{{ attributes.city | default("") }}``, ``{{ campaign.name }}``,
conditionals and filters; checked when the campaign is created. In the HTML body values are
autoescaped. Whatever the subject renders to, and the name in the To header, has its control
characters replaced by spaces, so no value can ever add a header line, and the subject loses
the spaces around it. A value's own line breaks (CRLF, a bare CR, LF) are each one line
break of the body, however its line is rendered (templates.line_breaks).

Speed: ``CampaignTemplate.compile`` does all the work that is the same for every recipient
(header encoding, quoted-printable encoding of every body line without template syntax, the
MIME skeleton). ``render`` then encodes only the lines that hold a field, filling plain
fields with ``str.format`` and running Jinja only for the lines that need it, and joins
byte strings: a few microseconds per message instead of the hundreds an
``email.message.EmailMessage`` costs.

The output is a complete RFC 5322 message with CRLF line endings, every line at most 78
octets where it can be folded and never over 998, bodies quoted-printable, headers ASCII
(RFC 2047 encoded-words for non-ASCII text). An international domain in To, From or
Reply-To goes in as its A-label (addresses.header_address), so the message needs no
SMTPUTF8 whatever relay it meets; only an address whose local part is not ASCII goes in as
UTF-8 (RFC 6532). It is not dot-stuffed. With the DKIM variables set, a DKIM-Signature
(service/mail/dkim.py) per key goes in front: the fields and body pieces the same for every recipient
are canonicalised once per campaign, a body without merge fields is hashed once.

Compiled with the campaign's account identity (service/accounts/identity.py), a campaign is signed with
the account's keys for its From domain, its MAIL FROM is the account's return path and its
List-Unsubscribe mailto the account's; each part the account did not set is the environment's
(docs/design.md#sending-identity).
"""

import hashlib
import re
import secrets
import time
from binascii import b2a_base64, b2a_qp
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.policy import default as default_policy
from email.utils import format_datetime
from typing import Protocol

from jinja2 import Template
from pydantic import SecretStr

from service.addresses import header_address
from service.domains import domain_key
from service.errors import ConfigError, Invalid
from service.mail import clicks, confirm, dkim, headers, opens, templates, unsubscribe, verp
from service.mail.mailing import Mailing

_NEWLINE = re.compile(r"\r\n|\r|\n")
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_FOLD_AT = 78
_MAX_LINE = 998
_EW_BYTES = 39  # 52 base64 characters: "Subject: " plus one encoded-word stays under 76
CRLF = b"\r\n"


# -- templates --------------------------------------------------------------------------


def check_template(text: str, where: str, html: bool = False) -> None:
    """Raise Invalid, one line naming ``where`` and the line, for a template that is refused."""
    templates.check(text, where, html)


# -- headers ----------------------------------------------------------------------------


def clean(text: str) -> str:
    """Control characters (C0, C1, DEL, line and paragraph separators) become spaces."""
    return text if text.isprintable() else _UNSAFE.sub(" ", text)


def _encoded_words(text: str) -> list[bytes]:
    """RFC 2047 B encoded-words, split between characters, each well under 75 octets."""
    data = text.encode("utf-8")
    words = []
    start = 0
    while start < len(data):
        end = min(start + _EW_BYTES, len(data))
        while end < len(data) and data[end] & 0xC0 == 0x80:  # not inside a character
            end -= 1
        words.append(b"=?utf-8?b?" + b2a_base64(data[start:end], newline=False) + b"?=")
        start = end
    return words


def _fold(name: bytes, atoms: list[bytes]) -> bytes | None:
    """A header line, folded before atoms past column 78; None if a line would pass 998."""
    line = name + b": " + b" ".join(atoms)
    if len(line) <= _FOLD_AT:
        return line + CRLF
    lines = []
    line = name + b":"
    for atom in atoms:
        if atom and len(line) + 1 + len(atom) > _FOLD_AT and line.strip(b" \t") != name + b":":
            lines.append(line)
            line = b""
        line += b" " + atom
    lines.append(line)
    if any(len(item) > _MAX_LINE for item in lines):
        return None
    return b"\r\n".join(lines) + CRLF


def _plain_ascii(text: str) -> bool:
    return text.isascii() and "=?" not in text


def unstructured(name: bytes, text: str) -> bytes:
    """A Subject-like header line, without surrounding spaces; ``text`` must already be clean()."""
    text = text.strip(" ")
    if _plain_ascii(text):
        line = _fold(name, text.encode().split(b" ")) if text else name + b":" + CRLF
        if line is not None:
            return line
    line = _fold(name, _encoded_words(text))
    assert line is not None  # encoded words are short: folded, no line passes 998
    return line


def _address_bytes(address: str) -> bytes:
    if not address.isprintable() or " " in address or "<" in address or ">" in address or "@" not in address:
        raise ValueError(f"refusing to put {address[:100]!r} in a header")
    if len(address) > 320:  # RFC 5321: 64 octets of local part, 255 of domain
        raise ValueError(f"address longer than 320 characters: {address[:100]!r}...")
    return b"<" + header_address(address).encode("utf-8") + b">"  # an ASCII local part: an A-label domain


def mailbox(name: bytes, display_name: str, address: str) -> bytes:
    """``Name: "Display Name" <address>``, or ``Name: address`` when display_name is empty.

    ValueError when the address holds a control character, a space or angle brackets, or is
    longer than an address can be.
    """
    addr = _address_bytes(address)
    display_name = clean(display_name).strip()
    if not display_name:
        return name + b": " + addr[1:-1] + CRLF
    if _plain_ascii(display_name):
        quoted = '"' + display_name.replace("\\", "\\\\").replace('"', '\\"') + '"'
        line = _fold(name, [*quoted.encode().split(b" "), addr])
        if line is not None:
            return line
    line = _fold(name, [*_encoded_words(display_name), addr])
    assert line is not None  # encoded words and an address of at most 322 characters: no line passes 998
    return line


_date_cache: tuple[int, bytes] = (-1, b"")


def date_header(now: float) -> bytes:
    """``Date: …`` in RFC 5322 form, formatted once per second."""
    global _date_cache
    second = int(now)
    if _date_cache[0] != second:
        stamp = format_datetime(datetime.fromtimestamp(second, UTC))  # "… +0000"
        _date_cache = (second, b"Date: " + stamp.encode() + CRLF)
    return _date_cache[1]


# -- bodies -----------------------------------------------------------------------------


def qp_lines(text: str) -> bytes:
    """Quoted-printable of ``text`` with CRLF line breaks, ending with CRLF."""
    if "\r" in text or "\n" in text:
        text = _NEWLINE.sub("\r\n", text)
    text += "\r\n"
    return b2a_qp(text.encode("utf-8", "replace"), istext=True)


class _Body:
    """A body as bytes: runs of lines without template syntax encoded once, the rest per recipient."""

    __slots__ = ("fields", "jinja", "pieces")

    def __init__(self, text: str, where: str, html: bool = False, tracked: str | None = None):
        """`tracked`: the text with its links rewritten (service/mail/clicks.py), what is compiled."""
        env = templates.HTML if html else templates.TEXT
        self.fields = templates.check(text, where, html)
        if tracked is not None and tracked != text:
            self.fields.add(templates.LINK_FIELD)  # the body differs per recipient
        self.pieces: list[bytes | str | object] = []  # encoded lines, format strings, Jinja templates
        for dynamic, item in templates.compiled(env, text if tracked is None else tracked):
            self.pieces.append(item if dynamic else qp_lines(item))
        self.jinja = any(piece.__class__ not in (bytes, str) for piece in self.pieces)

    def render(self, values: Mapping[str, str], context: templates.Context | None, out: list[bytes]) -> None:
        for piece in self.pieces:
            if piece.__class__ is bytes:
                out.append(piece)
            elif piece.__class__ is str:
                out.append(qp_lines(piece.format_map(values)))
            else:
                assert context is not None  # a body with a Jinja piece is given its context
                out.append(qp_lines(templates.run(piece, context)))


# -- the campaign -----------------------------------------------------------------------

_TEXT_PART = b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"
_HTML_PART = b"Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n"


def _sender(from_address: str) -> Address:
    if not isinstance(from_address, str) or _UNSAFE.search(from_address):
        raise Invalid("from address: must be one line of printable text")
    try:
        header = default_policy.header_factory("From", from_address)
        groups, defects = header.groups, header.defects
        addresses: tuple[Address, ...] = (
            groups[0].addresses if len(groups) == 1 and groups[0].display_name is None else ()
        )
        valid = len(addresses) == 1 and addresses[0].username and addresses[0].domain and not defects
    except (HeaderParseError, AttributeError, IndexError, TypeError, ValueError):  # the parser's ways to fail
        valid = False
    if not valid:
        raise Invalid(f"from address: expected one address like 'Name <a@example.org>': {from_address!r}")
    return addresses[0]


def _domain(domain: str) -> bytes:
    try:
        ascii_domain = domain.encode("ascii") if domain.isascii() else domain.encode("idna")
    except UnicodeError:
        ascii_domain = b""
    if not ascii_domain or len(ascii_domain) > 253 or any(c in ascii_domain for c in b' <>@()[]\\",;:'):
        raise Invalid(f"Message-ID domain {domain!r} is not a domain name (set EINMAL_MESSAGE_ID_DOMAIN)")
    return ascii_domain


class Identity(Protocol):
    """What a campaign is sent as of its account's identity (service/accounts/identity.py Identity)."""

    @property
    def domains(self) -> Sequence: ...  # DomainKeys: domain, selectors, keys

    @property
    def return_path(self) -> str | None: ...

    @property
    def return_path_secret(self) -> SecretStr | None: ...

    @property
    def unsubscribe_mailto(self) -> str | None: ...


class CampaignTemplate:
    """A campaign ready to render: ``CampaignTemplate.compile(campaign, mailing).render(…)``."""

    __slots__ = (
        "_between",
        "_campaign",
        "_confirm",
        "_digest",
        "_dkim",
        "_end",
        "_extra",
        "_from",
        "_head",
        "_html",
        "_id_prefix",
        "_id_suffix",
        "_jinja",
        "_mailto",
        "_signer",
        "_start",
        "_subject",
        "_subject_piece",
        "_text",
        "_trackers",
        "_url_prefix",
        "_verp",
        "account_id",
        "campaign_id",
        "clock",
        "envelope_from",
    )
    # what compile() makes of the campaign, once; render() reads it for every recipient
    campaign_id: int
    account_id: int
    clock: Callable[[], float]  # time.time; a test's own clock
    envelope_from: str
    _campaign: dict[str, object]  # the templates' `campaign` variable
    _subject_piece: str | Template  # the Subject: a format string or a Jinja template
    _subject: bytes | None  # the Subject field when it is the same for everyone
    _text: _Body
    _html: _Body | None
    _jinja: bool  # whether any piece is a Jinja template (they get the full variables)
    _verp: verp.ReturnPath | None
    _from: bytes
    _id_prefix: bytes
    _id_suffix: bytes
    _confirm: tuple[confirm.Signer, str] | None
    # a campaign with click or open tracking: its links' and pixel's URLs per recipient, each signer's
    _trackers: tuple[clicks.Signer | opens.Signer, ...]
    _digest: str  # the boundary's: the same campaign always gets the same one
    _extra: bytes  # Reply-To, List-Id, Feedback-ID and the campaign's own headers
    _signer: unsubscribe.Signer | None
    _url_prefix: str  # the unsubscribe link without its token
    _mailto: bytes
    _head: bytes  # the fields after the per-recipient ones, to the empty line
    _start: bytes  # the MIME part boundaries, empty for a text-only message
    _between: bytes
    _end: bytes
    _dkim: dkim.CampaignSigner | None

    @classmethod
    def compile(cls, campaign: Mapping, mailing: Mailing, identity: Identity | None = None) -> "CampaignTemplate":
        """Do once what is the same for every recipient, as the campaign's account `identity` (None: as the
        environment describes). Invalid when the campaign is unusable."""
        self = cls()
        self.campaign_id = int(campaign["id"])
        self.account_id = int(campaign["account_id"])
        self._campaign = {"id": self.campaign_id, "name": templates.line_breaks(campaign.get("name") or "")}
        self.clock = time.time
        subject = clean(campaign["subject"])
        used = templates.check(subject, "subject")
        self._subject_piece = templates.piece(templates.TEXT, subject)
        self._subject = None
        if not used and self._subject_piece.__class__ is str:
            self._subject = unstructured(b"Subject", clean(self._subject_piece.format_map({})))
        links, html = self._compile_tracking(campaign, mailing)
        self._text = _Body(campaign["body_text"], "body_text", tracked=links.text if links else None)
        self._html = (
            _Body(campaign["body_html"], "body_html", html=True, tracked=html) if campaign.get("body_html") else None
        )
        self._jinja = (
            self._subject_piece.__class__ is not str or self._text.jinja or bool(self._html and self._html.jinja)
        )
        sender = _sender(campaign["from_address"])
        self.envelope_from = sender.addr_spec
        try:
            self._verp = (
                verp.ReturnPath.of_account(identity.return_path, identity.return_path_secret, mailing)
                if identity
                else verp.ReturnPath.from_settings(mailing)
            )
            signer = dkim.account_signer(identity.domains, domain_key(sender.domain)) if identity else None
        except (ValueError, ConfigError) as exc:
            raise Invalid(f"the account's sender identity: {exc}") from None
        try:
            self._from = mailbox(b"From", sender.display_name, sender.addr_spec)
        except ValueError as exc:
            raise Invalid(f"from address: {exc}") from None
        domain = _domain(mailing.message_id_domain or sender.domain)
        self._id_prefix = b"Message-ID: <campaign.%d." % self.campaign_id
        self._id_suffix = b"@" + domain + b">\r\n"
        mailto = mailing.unsubscribe_mailto
        if identity and identity.unsubscribe_mailto:
            try:
                mailto = unsubscribe.plain_address(identity.unsubscribe_mailto, "the account's unsubscribe mailto")
            except ValueError as exc:
                raise Invalid(str(exc)) from None
        fields = used | self._text.fields | (self._html.fields if self._html else set())
        self._compile_unsubscribe(mailing, fields, mailto)
        if campaign.get("kind") == "message" and "unsubscribe_url" not in fields:
            # transactional (a password reset): no bulk List-Unsubscribe headers unless its bodies offer the link
            self._url_prefix, self._mailto = "", b""
        self._confirm = None  # a list's confirmations (docs/design.md#api): (signer, the link without its token)
        if campaign.get("kind") == "confirmation" and mailing.confirm_url and mailing.unsubscribe_secret:
            self._confirm = (confirm.Signer(mailing.unsubscribe_secret), unsubscribe.link(mailing.confirm_url, ""))
        # the same campaign always gets the same boundary: a preview is the message that goes out
        content = "\0".join((campaign["subject"], campaign["body_text"], campaign.get("body_html") or ""))
        self._digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        sender_id = signer.signers[0].domain.encode() if signer else None
        self._extra = self._campaign_headers(campaign, mailing, domain, sender_id)
        self._compile_mime()
        self._dkim = None
        if signer := signer or dkim.signer(mailing):  # the fields and pieces every message shares, canonicalised once
            static = [
                self._start,
                self._between,
                self._end,
                *self._text.pieces,
                *(self._html.pieces if self._html else ()),
            ]
            no_fields = not self._text.fields and (self._html is None or not self._html.fields)
            names = (b"To", b"Subject", b"Date", b"Message-ID") + (
                (b"List-Unsubscribe",) if self._url_prefix or self._mailto else ()
            )  # as render() writes them
            self._dkim = signer.prepare(
                self._from + self._head[:-2], [p for p in static if p.__class__ is bytes], no_fields, names
            )
        return self

    @property
    def costly(self) -> bool:
        """Whether a render runs Jinja (up to the sandbox's budget, docs/design.md#templates) or signs with an RSA
        key larger than 2,048 bits (a millisecond or more of OpenSSL, which lets the event loop run meanwhile): the
        sender renders it in a worker thread; one of format strings alone, signed with Ed25519, RSA-2048 (~0.3 ms,
        service/mail/dkim.py LOOP_RSA_BITS) or not at all, on the event loop."""
        return self._jinja or (self._dkim is not None and self._dkim.slow)

    @property
    def has_one_click(self) -> bool:
        """Whether its messages carry a one-click unsubscribe (List-Unsubscribe with a link, and -Post)."""
        return bool(self._url_prefix)

    def bodies_use(self, variable: str) -> bool:
        """Whether the text or the HTML body uses ``variable``: ``unsubscribe_url`` is a visible link."""
        return variable in self._text.fields or bool(self._html and variable in self._html.fields)

    def envelope_sender(self, subscriber_id: int) -> str:
        """MAIL FROM for one recipient: the From address, or with EINMAL_RETURN_PATH its VERP address."""
        if self._verp is None:
            return self.envelope_from
        return self._verp.address(self.campaign_id, subscriber_id)

    # -- the headers an operator chooses (service/mail/headers.py checks them) ----------------------

    def _campaign_headers(
        self, campaign: Mapping, mailing: Mailing, domain: bytes, sender_id: bytes | None = None
    ) -> bytes:
        """Reply-To, List-Id, Feedback-ID and the campaign's own headers: the same for every recipient."""
        lines = []
        if campaign.get("reply_to"):
            reply_to = _sender(campaign["reply_to"])  # checked as --from is: mailbox() cannot refuse it
            lines.append(mailbox(b"Reply-To", reply_to.display_name, reply_to.addr_spec))
        if campaign.get("list_id"):
            phrase, identifier = headers.list_id(campaign["list_id"])
            quoted = ('"' + phrase.replace("\\", "\\\\").replace('"', '\\"') + '"').encode().split(b" ")
            words = (quoted if _plain_ascii(phrase) else _encoded_words(phrase)) if phrase else []
            line = _fold(b"List-Id", [*words, b"<" + identifier.encode() + b">"])
            assert line is not None  # list_id() keeps the value to 900 characters: no line passes 998
            lines.append(line)
        if sender_id is None:  # the account's DKIM domain, else the environment's, else the Message-ID's
            sender_id = mailing.dkim_domain.encode() if mailing.dkim_domain else domain
        lines.append(b"Feedback-ID: %d:%d:einmal:%s\r\n" % (self.campaign_id, self.account_id, sender_id))
        for name, value in headers.stored_headers(campaign.get("headers")):
            lines.append(unstructured(name.encode(), value))
        return b"".join(lines)

    def _compile_tracking(self, campaign: Mapping, mailing: Mailing) -> tuple[clicks.Links | None, str | None]:
        """The links of a campaign with click tracking (None without) and its HTML body as compiled, with the
        links and the pixel of open tracking (None: as it is); their signers."""
        self._trackers = ()
        html = campaign.get("body_html")
        clicked, opened = bool(campaign.get("track_clicks")), bool(campaign.get("track_opens") and html)
        if not (clicked or opened):
            return None, None
        if lacking := clicks.missing(mailing):
            raise Invalid(f"{'click' if clicked else 'open'} tracking needs {' and '.join(lacking)}")
        assert mailing.click_url and mailing.unsubscribe_secret  # clicks.missing: both set
        links = clicks.Links.of(campaign["body_text"], html) if clicked else None
        if links is not None:
            self._trackers += (clicks.Signer(mailing.unsubscribe_secret, mailing.click_url, len(links.urls)),)
            html = links.html
        if opened and html:
            self._trackers += (opens.Signer(mailing.unsubscribe_secret, mailing.click_url),)
            html = opens.with_pixel(html)
        return links, html

    def _compile_unsubscribe(self, mailing: Mailing, used: set[str], mailto: str | None) -> None:
        self._signer = None
        self._url_prefix = ""
        self._mailto = b""
        if mailto:
            self._mailto = b"<mailto:" + mailto.encode() + b"?subject=unsubscribe%20"
        if not mailing.unsubscribe_url:
            if "unsubscribe_url" in used:
                raise Invalid("{{ unsubscribe_url }} is used but EINMAL_UNSUBSCRIBE_URL is not set")
            if not self._mailto:
                return
        if mailing.unsubscribe_secret is None or not mailing.unsubscribe_secret.get_secret_value():
            which = "EINMAL_UNSUBSCRIBE_URL" if mailing.unsubscribe_url else "EINMAL_UNSUBSCRIBE_MAILTO"
            raise Invalid(f"EINMAL_UNSUBSCRIBE_SECRET must be set when {which} is")
        self._signer = unsubscribe.Signer(mailing.unsubscribe_secret)
        if not mailing.unsubscribe_url:
            return
        url = mailing.unsubscribe_url
        if not (url.isascii() and url.isprintable()) or any(c in url for c in " <>"):
            raise Invalid("EINMAL_UNSUBSCRIBE_URL: must be an ASCII URL without spaces or angle brackets")
        if len(mailing.unsubscribe_url) > 800:
            raise Invalid("EINMAL_UNSUBSCRIBE_URL: longer than 800 characters")
        self._signer = unsubscribe.Signer(mailing.unsubscribe_secret)
        self._url_prefix = unsubscribe.link(mailing.unsubscribe_url, "")

    def _compile_mime(self) -> None:
        head = self._extra + b"MIME-Version: 1.0\r\n"
        if self._url_prefix:
            head = b"List-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" + head
        self._between = self._end = self._start = b""  # _head ends with the empty line, the body starts
        if self._html is None:
            self._head = head + _TEXT_PART
            return
        # "=_" cannot occur in quoted-printable output, so the bodies cannot contain the boundary
        boundary = b"=_einmal.%d.%s" % (self.campaign_id, self._digest.encode())
        self._head = head + b'Content-Type: multipart/alternative;\r\n boundary="' + boundary + b'"\r\n\r\n'
        self._start = b"--" + boundary + CRLF + _TEXT_PART
        self._between = b"\r\n--" + boundary + CRLF + _HTML_PART
        self._end = b"\r\n--" + boundary + b"--\r\n"

    def render_test(
        self,
        email: str,
        name: str | None,
        attributes: str | Mapping | None,
        subject_prefix: str,
        to_name: str | None = None,
    ) -> bytes:
        """A test message (`einmal campaign test`): one subscriber's message to ``email``, but with
        ``subject_prefix`` before its subject, a Message-ID of its own (`<test.<campaign>.<random>@…>`, never the
        one the subscriber's real message carries) and an unsubscribe token that names nobody; its To names
        ``to_name`` (None: the subscriber's ``name``), made as every message's To is."""
        message_id = b"Message-ID: <test.%d.%s" % (self.campaign_id, secrets.token_hex(8).encode()) + self._id_suffix
        return self.render(
            unsubscribe.TEST_SUBSCRIBER,
            email,
            name,
            attributes,
            subject_prefix=subject_prefix,
            message_id=message_id,
            to_name=to_name,
        )

    def render(
        self,
        subscriber_id: int,
        email: str,
        name: str | None,
        attributes: str | Mapping | None = None,
        *,
        subject_prefix: str = "",
        message_id: bytes | None = None,
        to_name: str | None = None,
    ) -> bytes:
        """The complete message for one recipient, CRLF line endings, not dot-stuffed.

        ``attributes`` are the subscriber's, a mapping or its JSON text. ValueError when ``email``
        holds a control character, a space or angle brackets, lacks an "@", or is longer than 320
        characters, or when the templates fail for this recipient (templates.RenderError): the
        caller marks that recipient failed. ``to_name`` (a test message's) names the recipient in To instead
        of ``name``.
        """
        if name is None:  # a NULL name reads as no name
            name = ""
        elif "\r" in name:
            name = templates.line_breaks(name)
        # out[0]: the DKIM-Signature fields, if any
        out = [b"", self._from, mailbox(b"To", name if to_name is None else to_name, email)]
        url = token = ""
        if self._signer is not None:
            token = self._signer.token(self.account_id, self.campaign_id, subscriber_id)
            url = self._url_prefix + token if self._url_prefix else ""
        confirm_url = ""
        if self._confirm is not None:
            confirm_url = self._confirm[1] + self._confirm[0].token(self.account_id, self.campaign_id, subscriber_id)
        values = {"name": name, "email": email, "unsubscribe_url": url, "confirm_url": confirm_url}
        links = None
        if self._trackers:  # the tracked links' and pixel's URLs: the fields besides them are escaped for HTML
            links = {}
            for tracker in self._trackers:
                links.update(tracker.urls(self.account_id, self.campaign_id, subscriber_id))
            values, plain = {**values, **links}, values
        variables = None
        if self._jinja:
            variables = {**values, "attributes": templates.attributes(attributes), "campaign": self._campaign}
        if self._subject is None or subject_prefix:
            subject = {**(variables or values), "name": clean(name).strip()}
            piece = self._subject_piece
            text = piece.format_map(subject) if piece.__class__ is str else templates.run(piece, subject)
            out.append(unstructured(b"Subject", clean(subject_prefix + text)))
        else:
            out.append(self._subject)
        now = self.clock()
        out.append(date_header(now))
        out.append(message_id or self._id_prefix + b"%d" % subscriber_id + self._id_suffix)
        if url and not self._mailto:
            out.append(b"List-Unsubscribe: <" + url.encode() + b">\r\n")
        elif self._mailto:
            mailto = self._mailto + token.encode() + b">"
            out.append(b"List-Unsubscribe: " + (b"<" + url.encode() + b">,\r\n " if url else b"") + mailto + CRLF)
        fields = len(out)
        out.append(self._head)
        if self._start:
            out.append(self._start)
        context = templates.context(templates.TEXT, variables) if self._text.jinja and variables is not None else None
        self._text.render(values, context, out)
        if self._html is not None:
            out.append(self._between)
            context = (
                templates.context(templates.HTML, variables) if self._html.jinja and variables is not None else None
            )
            escaped = templates.escaped(values if links is None else plain)
            if links is not None:
                escaped.update(links if self._trackers[0].html_safe else templates.escaped(links))
            self._html.render(escaped, context, out)
            out.append(self._end)
        if self._dkim is not None:  # signed over the fields after From and the body after the static head
            out[0] = self._dkim.sign(out[2:fields], out[fields + 1 :], now)
        return b"".join(out)
