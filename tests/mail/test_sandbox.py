"""The budget of one message's template (service/mail/sandbox.py): every hostile form ends at once with
its reason, in bounded memory; one subscriber's data fails that recipient alone; ordinary templates
render exactly what Jinja's own sandbox renders."""

import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

from service.errors import Invalid
from service.mail import templates
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate, check_template
from service.mail.sandbox import CHARS_PER_STEP, MAX_OUTPUT, MAX_STEPS
from tests.mail.test_render import campaign, make_settings

STEPS = "more than 100,000 steps for one message"
BIG = "{% set a = 'x' * 999999 %}"
NESTED = (
    "{% for a in attributes.s | default('') %}{% for b in attributes.s | default('') %}"
    "{% for c in attributes.s | default('') %}{% if c == '!' %}!{% endif %}"
    "{% endfor %}{% endfor %}{% endfor %}\n"
)

HOSTILE = [
    ("{% for a in [0]*999999 %}{% for b in [0]*999999 %}{% endfor %}{% endfor %}", STEPS),
    ("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", STEPS),
    (BIG + "{{ ('x' * 300) | replace('x', a) | length }}", "a replace of more than 1,000,000 characters"),
    (BIG + "{{ ('x' * 300).replace('x', a) | length }}", "a replace of more than 1,000,000 characters"),
    ("{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(60) }}", STEPS),
    ("{% macro f(n) %}{{ [f(n-1), f(n-1)] | length if n else '' }}{% endmacro %}{% set x = f(60) %}", STEPS),
    ("{{ ('%300000000s' % 'x') | length }}", "% formatting of more than 1,000,000 characters"),
    ("{{ '%*s' % (300000000, 'x') }}", "a '*' width in % formatting is not allowed"),
    ("{{ name.center(300000000) | length }}", "access to attribute 'center' of 'str' object is unsafe"),
    ("{{ name.ljust(300000000) | length }}", "access to attribute 'ljust' of 'str' object is unsafe"),
    ("{{ '{:>300000000}'.format(name) }}", "access to attribute 'format' of 'str' object is unsafe"),
    ("{{ name | center(300000000) }}", "no filter named 'center'"),
    (BIG + "{{ ([''] * 301) | join(a) | length }}", "a join of more than 1,000,000 characters"),
    (BIG + "{{ a.join([''] * 301) | length }}", "a join of more than 1,000,000 characters"),
    (BIG + "{% set b = a~a~a~a~a~a~a~a~a~a %}{% set c = b~b~b~b~b~b~b~b~b~b %}{{ c | length }}", STEPS),
    (BIG + "{{ ([[a] * 100] * 100) | string | length }}", STEPS),
    (BIG + "{{ [a] * 1000 }}", STEPS),
    ("{{ [1, 2] | tojson(indent=300000000) }}", "tojson's indent is not allowed"),
    ("{{ ('a.co ' * 100000) | urlize(target='t' * 999999) | length }}", "urlize of more than 1,000,000"),
    ("{% set a = 10 ** 64 %}{% set b = a ** 64 %}{{ b ** 64 }}", "power too large"),
    ("{% set a = 7 ** 1000 %}{% set b = a * a %}{% set c = b * b %}{{ c * c }}", "a product of more than 4,096 bits"),
    (
        "{% macro m() %}{% for i in range(100000) %}" + "z" * 100000 + "{% endfor %}{% endmacro %}{% set x = m() %}",
        STEPS,
    ),
    ("{% set x %}{% for i in range(100000) %}" + "q" * 1000 + "{% endfor %}{% endset %}", STEPS),
    (
        "{% macro w() %}{{ caller() }}{{ caller() }}{% endmacro %}{% macro f(n) %}{% if n %}{% call w() %}"
        "{{ f(n-1) }}{% endcall %}{% else %}" + "y" * 100000 + "{% endif %}{% endmacro %}{% set x = f(40) %}",
        STEPS,
    ),
    (
        "{% set d = dict(a='x' * 999999, b='x' * 999999) %}{% for i in range(1000) %}{% if d.values() | list"
        " == [] %}{% endif %}{% endfor %}",
        STEPS,
    ),
    ("{{ ([[0] * 300] * 300) | sum(start=[]) | length }}", STEPS),
]


def used(env: templates.Sandbox) -> int:
    return MAX_STEPS - env.budget


@pytest.mark.parametrize(("text", "problem"), HOSTILE)
def test_a_hostile_template_is_refused_at_create_at_once_and_in_bounded_memory(text, problem):
    tracemalloc.start()
    try:
        with pytest.raises(Invalid) as error:
            check_template(text, "text body")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(error.value)
    assert message.startswith("text body: ") and problem in message and "\n" not in message, message
    assert peak < 40 * MAX_OUTPUT, peak  # bytes: the largest values it made were refused before they were made


def test_ordinary_loops_filters_and_macros_fit_the_budget_many_times_over():
    text = (
        "{% macro item(x) %}<{{ x | title }}>{% endmacro %}"
        "{% for x in attributes.things %}{{ loop.index }} {{ item(x) }}{% if x == 'b' %}!{% endif %}"
        "{{ x ~ '-' ~ (x * 3) }}{% endfor %}{{ attributes.things | join(', ') | upper }}"
        "{{ '%-5s|' % name }}{{ attributes.things[1:] | list | length }}"
    )
    template = templates.TEXT.from_string(text)
    things = [f"thing {i}" for i in range(200)]
    variables = {
        "name": "Jo",
        "email": "j@example.org",
        "unsubscribe_url": "u",
        "attributes": {"things": things},
        "campaign": {"id": 1, "name": "c"},
    }
    out = templates.run(template, variables)
    assert out.startswith("1 <Thing 0>thing 0-thing 0thing 0thing 0") and out.endswith("Jo   |199")
    assert used(templates.TEXT) < MAX_STEPS // 10


def test_one_subscribers_long_attribute_fails_that_recipient_alone_and_again_the_same_way():
    check_template(NESTED, "text body")  # the sample subscriber has no attributes: it passes the create check
    template = CampaignTemplate.compile(campaign(body_text="Hi {{ name }}\n" + NESTED), Mailing.of(make_settings()))
    assert b"Hi A" in template.render(1, "a@example.org", "A", json.dumps({"s": "abc"}))
    reasons = []
    for _ in range(2):  # counted, not timed: every node fails this message the same way
        with pytest.raises(ValueError, match=STEPS) as error:
            template.render(2, "b@example.org", "B", json.dumps({"s": "x" * 3000}))
        reasons.append(str(error.value))
        assert MAX_STEPS < used(templates.TEXT) <= MAX_STEPS + 3000 // CHARS_PER_STEP + 2
    assert reasons[0] == reasons[1]
    assert b"Hi C" in template.render(3, "c@example.org", "C", "{}")  # the next message has its whole budget


# -- the budget changes nothing an ordinary template renders --------------------------------------

PLAIN = [
    ImmutableSandboxedEnvironment(autoescape=html, undefined=StrictUndefined, keep_trailing_newline=True)
    for html in (False, True)
]
LEAVES = [
    "{{ name }}",
    "{{ attributes.k | default('-') }}",
    "text <&>",
    "{{ x }}",
    "{{ x ~ name }}",
    "{{ (name * 2)[1:] }}",
    "{{ '%s=%d' % (name, 3) }}",
    "{{ things | join(',') }}",
    "{{ things | sort | first }}",
    "{{ 2 ** 10 + 3 * 4 - 1 }}",
    "{{ things | map('upper') | list }}",
    "{{ name.replace('o', '0') }}",
    "{{ [name, x] }}",
    "{{ {'a': things} }}",
    "{{ loop_free | default(1) }}",
    "{{ m(name) }}",
    "{{ name is in things }}",
    "{{ things | select('ne', 'b') | join }}",
    "{{ attributes | tojson }}",
    "{{ things | replace('a', 'b') }}",
    "{{ name | truncate(3, true, '') }}",
    "\n",
]
CONDITIONS = ["name == 'Jo'", "x in things", "things[0] < 'b'", "not x", "name ~ 'x' != 'Jox'"]


def nested(inner):
    run = st.lists(inner, max_size=5).map("".join)
    return st.one_of(
        st.builds(
            lambda c, a, b: f"{{% if {c} %}}{a}{{% else %}}{b}{{% endif %}}", st.sampled_from(CONDITIONS), run, run
        ),
        st.builds(lambda a: f"{{% for x in things %}}{a}{{{{ loop.index }}}}{{% endfor %}}", run),
        st.builds(lambda a: f"{{% filter upper %}}{a}{{% endfilter %}}", run),
        st.builds(lambda a: f"{{% set s %}}{a}{{% endset %}}{{{{ s }}}}", run),
        st.builds(
            lambda a: f"{{% macro w() %}}[{{{{ caller() }}}}]{{% endmacro %}}{{% call w() %}}{a}{{% endcall %}}", run
        ),
    )


MACRO = "{% macro m(v) %}({{ v }}){% endmacro %}"
ordinary = st.lists(st.recursive(st.sampled_from(LEAVES), nested, max_leaves=10), max_size=8).map("".join)


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=ordinary, html=st.booleans())
def test_an_ordinary_template_renders_what_jinjas_own_sandbox_renders(text, html):
    text = MACRO + text
    variables = {"name": "Jo", "x": "a", "things": ["b", "a", "c<"], "attributes": {"k": "v&w"}}
    expected = PLAIN[html].from_string(text).render(variables)
    env = templates.HTML if html else templates.TEXT
    assert templates.run(env.from_string(text), variables) == expected
