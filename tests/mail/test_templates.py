"""Jinja2 campaign templates: variables, conditionals and filters render; the sandbox holds;
the fast path (plain fields filled with str.format) gives exactly what Jinja gives."""

import json
import re

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from service.errors import Invalid
from service.mail import templates
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate, check_template
from tests.mail.test_render import (
    BASE_HEADERS,
    CONTROL,
    UNSUBSCRIBE_HEADERS,
    assert_headers_clean,
    body,
    campaign,
    header_names,
    make_settings,
    parse,
)


def rendered(name="Jane", attributes=None, email="jane@example.org", **fields) -> bytes:
    template = CampaignTemplate.compile(campaign(**{"name": "spring", **fields}), Mailing.of(make_settings()))
    return template.render(1007, email, name, json.dumps(attributes or {}))


# -- what templates can do ----------------------------------------------------------------


def test_attributes_conditionals_filters_and_the_campaign_render_in_subject_and_body():
    text = (
        '{% if attributes.plan | default("") == "pro" %}Dear Pro {{ name | upper }}'
        "{% else %}Hi {{ name }}{% endif %},\n"
        'news for {{ attributes.city | default("your town") }} from {{ campaign.name }} #{{ campaign.id }}.\n'
        "static line\n"
    )
    subject = "{{ campaign.name | title }} for {{ attributes.city | default('you') }}"
    pro = parse(
        rendered(attributes={"plan": "pro", "city": "Berlin"}, subject=subject, body_text=text, name="Jane", id=42)
    )
    assert str(pro["Subject"]) == "Spring for Berlin"
    assert body(pro) == "Dear Pro JANE,\nnews for Berlin from spring #42.\nstatic line\n"
    other = parse(rendered(attributes={}, subject=subject, body_text=text, name="Jo"))
    assert str(other["Subject"]) == "Spring for you"
    assert body(other) == "Hi Jo,\nnews for your town from spring #42.\nstatic line\n"


def test_autoescape_applies_to_the_html_body_only():
    raw = rendered(
        name="<b>Tom & Jerry</b>",
        attributes={"note": "<i>x</i>"},
        body_text="{{ name }} {{ attributes.note }}\n",
        body_html="<p>{{ name }} {{ attributes.note }}</p>{% if name %}<hr>{% endif %}\n",
    )
    text, html = (body(part) for part in parse(raw).iter_parts())
    assert text == "<b>Tom & Jerry</b> <i>x</i>\n"
    assert html == "<p>&lt;b&gt;Tom &amp; Jerry&lt;/b&gt; &lt;i&gt;x&lt;/i&gt;</p><hr>\n"


def test_a_missing_attribute_fails_that_recipient_alone_with_the_reason():
    template = CampaignTemplate.compile(campaign(body_text="{{ attributes.city }}\n"), Mailing.of(make_settings()))
    assert b"Berlin" in template.render(1, "a@example.org", "A", '{"city": "Berlin"}')
    with pytest.raises(ValueError, match="city"):
        template.render(2, "b@example.org", "B", "{}")


def test_attributes_with_line_breaks_cannot_add_a_header():
    evil = {"city": "Berlin\r\nBcc: victim@example.org\r\n\r\nbody", "x": "\u2028Cc: y@example.org"}
    raw = rendered(
        attributes=evil,
        subject="News for {{ attributes.city }}{{ attributes.x }}",
        body_html="<p>{{ attributes.city }}</p>",
    )
    message = parse(raw)
    assert header_names(message) == sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS)
    assert_headers_clean(message)
    # a value's CRLF is one line break (templates.line_breaks), then a space like every control character
    assert str(message["Subject"]) == "News for Berlin Bcc: victim@example.org  body Cc: y@example.org"


# -- the sandbox ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{{ ''.__class__ }}", "line 1: names starting with '_'"),
        ("x\n{{ ''.__class__.__mro__[1].__subclasses__() }}", "line 2: names starting with '_'"),
        ("{{ name['__class__'] }}", "line 1: names starting with '_'"),
        ("{{ cycler.__init__.__globals__ }}", "line 1: names starting with '_'"),
        ("{% import os %}", "line 1: import is not allowed"),
        ("x\n{%import os%}{{ name", "line 2: import is not allowed"),
        ("{% import 'os' as os %}", "line 1: import is not allowed"),
        ("{% from 'x' import y %}", "line 1: import is not allowed"),
        ("{% include 'x' %}", "line 1: include is not allowed"),
        ("{% extends 'x' %}", "line 1: extends is not allowed"),
        ("{{ lipsum(1000000) }}", "line 1: unknown variable 'lipsum'"),
        ("{{ namespace() }}", "line 1: unknown variable 'namespace'"),
        ("{{ name | center(1000000000) }}", "line 1: no filter named 'center'"),
        ("{{ '%*s' | format(1000000000, 'x') }}", "line 1: no filter named 'format'"),
        ("{{ [1, 2] | random }}", "line 1: no filter named 'random'"),
        ("{% for i in range(10**9) %}x{% endfor %}", "more than 100,000 loop items"),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "more than 100,000 steps for one message",
        ),
        ("{{ 'x' * 1000000000 }}", "repetition of more than"),
        ("{{ 2 ** 100000000 }}", "power too large"),
        ("{{ email.format.__self__ }}", "line 1: names starting with '_'"),
        ("{% set x = [] %}{{ x.append(1) }}", "unsafe"),
        ("{% for i in range(200) %}{{ 'x' * 10000 }}{% endfor %}", "longer than 1,000,000 characters"),
        ("{{ name.__len__() }}", "line 1: names starting with '_'"),
    ],
)
def test_sandbox_escapes_and_blow_ups_are_refused_when_checked(text, problem):
    with pytest.raises(Invalid) as error:
        check_template(text, "text body")
    message = str(error.value)
    assert message.startswith("text body: ") and problem in message and "\n" not in message


def test_a_data_dependent_blow_up_fails_the_recipient_not_the_node():
    template = CampaignTemplate.compile(
        campaign(
            body_text="{% for c in attributes.s %}{% for d in attributes.s %}{{ attributes.s }}"
            "{% endfor %}{% endfor %}\n"
        ),
        Mailing.of(make_settings()),
    )
    assert template.render(1, "a@example.org", "A", '{"s": "ab"}')
    with pytest.raises(ValueError, match="longer than 1,000,000 characters"):
        template.render(1, "a@example.org", "A", json.dumps({"s": "x" * 1000}))


def test_a_template_longer_than_the_limit_is_refused():
    with pytest.raises(Invalid, match=r"^text body: longer than 500,000 characters$"):
        check_template("x" * 1_000_000, "text body")


# -- the fast path gives what Jinja gives ---------------------------------------------------

# template pieces, some on the fast path, some only Jinja can run; blocks nest and span lines
LEAVES = [
    "{{ name }}",
    "{{email}}",
    "{{ unsubscribe_url }}",
    "plain text",
    "{{ name | upper }}",
    "{{ attributes.k | default('-') }}",
    "{# a comment\nover two lines #}",
    "{{ campaign.name }}",
    "{% raw %}{{ literal }}{% endraw %}",
    "é & <b>",
    " ",
    "\n",
    "\r\n",
    "\n\n",
    "{ ",
    "}}",
    "%",
]
CONDITIONS = ["name", "attributes.k", "not email", "attributes.k == 'v&w'"]


def blocks(inner):
    run = st.lists(inner, max_size=6).map("".join)
    return st.one_of(
        st.builds(
            lambda cond, a, b: f"{{% if {cond} %}}{a}{{% else %}}{b}{{% endif %}}",
            st.sampled_from(CONDITIONS),
            run,
            run,
        ),
        st.builds(lambda a: f"{{% for c in email[:2] %}}{a}{{% endfor %}}", run),
        st.builds(lambda a: f"{{% filter upper %}}{a}{{% endfilter %}}", run),
    )


template_text = st.lists(st.recursive(st.sampled_from(LEAVES), blocks, max_leaves=12), max_size=12).map("".join)


def whole(text: str, html: bool, url: str) -> str:
    """What one Jinja run over the whole template gives (no cutting into lines), in CRLF lines."""
    env = templates.HTML if html else templates.TEXT
    stripped = re.sub(r"(\r\n|\r|\n)\Z", "", text)
    return env.from_string(stripped).render(
        name="Jo <3",
        email="jo@example.org",
        unsubscribe_url=url,
        attributes={"k": "v&w"},
        campaign={"id": 42, "name": "spring"},
    )


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=template_text, html=st.booleans())
def test_cutting_a_body_into_lines_renders_what_one_jinja_run_renders(text, html):
    check_template(text, "body", html)
    settings = make_settings(url="https://u/")
    if html and not text:
        return  # an empty HTML body is no HTML part
    fields = {"body_html": text, "body_text": "x"} if html else {"body_text": text}
    message = parse(
        CampaignTemplate.compile(campaign(name="spring", **fields), Mailing.of(settings)).render(
            1, "jo@example.org", "Jo <3", {"k": "v&w"}
        )
    )
    part = list(message.iter_parts())[1] if html else message
    expected = whole(text, html, str(message["List-Unsubscribe"])[1:-1])
    assert body(part) == re.sub(r"\r\n|\r", "\n", expected) + "\n"


# -- round trips ------------------------------------------------------------------------

# every character but lone surrogates: CR, CRLF and LF in a value are each one line break of the body, on the
# fast path and in Jinja alike; in the subject they are spaces
value = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=value, city=value, plan=value)
def test_every_variable_value_is_parsed_back_from_the_message(name, city, plan):
    text = (
        "Hi {{ name }}\ncity={{ attributes.city }}\n{% if attributes.plan %}plan={{ attributes.plan }}{% endif %}\n"
        "to={{ email }} c={{ campaign.name }}\n"
    )
    template = CampaignTemplate.compile(
        campaign(
            name="spring",
            subject="{{ attributes.city }}|{{ name }}",
            body_text=text,
            body_html="<p>{{ attributes.city }}</p>",
        ),
        Mailing.of(make_settings()),
    )
    message = parse(template.render(5, "jane@example.org", name, json.dumps({"city": city, "plan": plan})))
    assert header_names(message) == sorted(BASE_HEADERS | UNSUBSCRIBE_HEADERS)
    assert_headers_clean(message)
    newline = re.compile(r"\r\n|\r")
    name, city, plan = (newline.sub("\n", v) for v in (name, city, plan))  # a value's line break is one
    subject = CONTROL.sub(" ", city) + "|" + CONTROL.sub(" ", name).strip()
    assert str(message["Subject"]) == subject.strip(" ")
    text_part, html_part = (body(part) for part in message.iter_parts())
    expected = f"Hi {name}\ncity={city}\n" + (f"plan={plan}" if plan else "") + "\nto=jane@example.org c=spring\n"
    assert text_part == expected
    escaped = city.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;")
    assert html_part == newline.sub("\n", f"<p>{escaped.replace(chr(39), '&#39;')}</p>\n")


breaks = st.text(alphabet=st.sampled_from("ab \r\n\t\x85\u2028é<&"), max_size=20)
LINES = "a {{ name }}\nb {{ email }} {{ name }}"
# the same lines filled by str.format line by line, and by one Jinja run over a block that spans them
FAST = campaign(
    name="spring",
    subject="{{ name }} news",
    body_text=LINES + "\nc {{ attributes.city }}\n",
    body_html="<p>{{ name }}</p>\n" + LINES + "\n",
)
JINJA = campaign(
    name="spring",
    subject="{{ name | string }} news",
    body_text="{% if name is string %}" + LINES + "{% endif %}\nc {{ attributes.city }}\n",
    body_html="<p>{{ name | string }}</p>\n{% if true %}" + LINES + "{% endif %}\n",
)


@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=breaks, city=breaks)
def test_a_value_with_line_breaks_renders_the_same_on_the_fast_path_and_through_jinja(name, city):
    """CR, CRLF and LF in a value give the same bytes either way, and never a header line."""
    templates_ = [CampaignTemplate.compile(c, Mailing.of(make_settings())) for c in (FAST, JINJA)]
    assert [t._text.pieces[0].__class__ for t in templates_] == [str, templates.TEXT.template_class]
    messages = [t.render(5, "jane@example.org", name, json.dumps({"city": city})) for t in templates_]
    assert messages[0].split(b"\r\nDate: ")[0] == messages[1].split(b"\r\nDate: ")[0]  # From, To, Subject
    bodies = [re.sub(rb"=_einmal\.\d+\.[0-9a-f]+", b"BOUNDARY", m.split(b"\r\n\r\n", 1)[1]) for m in messages]
    assert bodies[0] == bodies[1]  # byte for byte, but for the boundary, which derives from the template
    for message in messages:
        assert_headers_clean(parse(message))
        assert b"\r" not in message.replace(b"\r\n", b"") and b"\n" not in message.replace(b"\r\n", b"")


def test_a_text_is_compiled_once_for_the_campaigns_that_share_it_and_renders_each_its_own():
    """Every transactional message is a campaign: the pieces of a text already compiled are the same objects
    for the next campaign of it, and render what each recipient's values make."""
    text = "Hi {{ name }}\n{% if attributes.plan | default('') %}Plan {{ attributes.plan }}{% endif %}\nBye\n"
    mailing = Mailing.of(make_settings())
    first, second = (CampaignTemplate.compile(campaign(id=n, body_text=text), mailing) for n in (1, 2))
    jinja = [p for p in first._text.pieces if p.__class__ not in (bytes, str)]
    assert jinja and all(
        a is b for a, b in zip(first._text.pieces, second._text.pieces, strict=True) if a.__class__ not in (bytes, str)
    )
    assert templates.check(text, "body_text") == {"name", "attributes"}
    templates.check(text, "body_text").add("changed")  # each caller's own set
    assert templates.check(text, "body_text") == {"name", "attributes"}
    for template, name, plan in ((first, "Ann", "pro"), (second, "Bob", None)):
        raw = template.render(1007, f"{name.lower()}@example.org", name, json.dumps({"plan": plan} if plan else {}))
        made = body(parse(raw))
        assert f"Hi {name}" in made and ("Plan pro" in made) == (plan is not None)


def test_a_refused_text_names_its_own_place_each_time_and_a_long_one_is_not_kept():
    for where in ("body_text", "subject", "body_text"):
        with pytest.raises(Invalid, match=f"^{where}"):
            templates.check("{{ nope }}", where)
    long = "{{ name }}\n" + "x" * templates.KEPT
    assert templates.compiled(templates.TEXT, long) is not templates.compiled(templates.TEXT, long)
    assert templates.compiled(templates.TEXT, "{{ name }}!") is templates.compiled(templates.TEXT, "{{ name }}!")
