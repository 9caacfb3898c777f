"""What a template costs is what it is counted: the operations that cost far more than a copy (``title`` on a
huge value, sorting a string's characters…) spend steps for it, so a hostile template is refused in a few
milliseconds, the same way every time, and renders in threads at once never spend each other's budget."""

import threading
import time

import pytest

from service.errors import Invalid
from service.mail import sandbox, templates
from service.mail.mailing import Mailing
from service.mail.render import CampaignTemplate, check_template
from tests.mail.test_render import campaign, make_settings

STEPS = "more than 100,000 steps for one message"
ISSUE = "{% set s = attributes.pad * 495000 %}{% for i in range(4) %}{{ (s|title)|length }}{% endfor %}"
# a template and what the sandbox must answer, each within BOUND seconds
HUGE = "{% set s = 'a ' * 499999 %}"
HOSTILE = {
    "title of a huge value, four times": ISSUE.replace("attributes.pad", "'a '"),
    "upper of a huge value, fifty times": HUGE + "{% for i in range(50) %}{{ s|upper|length }}{% endfor %}",
    "str.title of a huge value": HUGE + "{% for i in range(50) %}{{ s.title()|length }}{% endfor %}",
    "huge string multiplication": "{% for i in range(100) %}{{ ('ab' * 499999)|length }}{% endfor %}",
    "the characters of a huge value, unique": "{{ ('a ' * 499999)|unique|list|length }}",
    "the characters of a huge value, sorted": "{{ ('a ' * 499999)|sort|length }}",
    "words of a huge value": "{% for i in range(20) %}{{ ('a ' * 499999)|wordcount }}{% endfor %}",
    "nested loops": "{% for i in range(999) %}{% for j in range(999) %}{{ i }}{% endfor %}{% endfor %}",
    "a big range": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
}
BOUND = 0.25  # seconds for one verdict: the budget's steps take about 0.1 s at most


def verdict(text: str) -> str:
    try:
        check_template(text, "text body")
    except Invalid as exc:
        return str(exc)
    return "accepted"


@pytest.mark.serial
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_template_is_refused_quickly_and_the_same_way_every_time(case: str) -> None:
    answers = set()
    for _ in range(5):
        started = time.perf_counter()
        answers.add(verdict(HOSTILE[case]))
        assert time.perf_counter() - started < BOUND, case
    assert answers == {
        f"text body: {STEPS} (each loop item, call, filter, operator and output is one, and each "
        "100 characters or item it handles)"
    }


@pytest.mark.serial
def test_the_issues_template_fails_its_recipient_quickly_and_the_same_way_every_time() -> None:
    template = CampaignTemplate.compile(campaign(body_text="Hi\n" + ISSUE + "\n"), Mailing.of(make_settings()))
    reasons = set()
    for pad in ("a ", "ab", "a ", "ab"):
        started = time.perf_counter()
        with pytest.raises(templates.RenderError) as error:
            template.render(1, "jane@example.org", "Jane", {"pad": pad})
        assert time.perf_counter() - started < BOUND
        reasons.add(str(error.value).split(" (")[0])
    assert reasons == {STEPS}
    assert b"Hi" in template.render(1, "jane@example.org", "Jane", {"pad": ""})  # an empty pad costs nothing


def test_renders_in_threads_at_once_each_have_their_own_budget() -> None:
    """Two thirds of the budget each: in threads at once they would pass it together if they shared it."""
    text = "{% for i in range(66000) %}{% endfor %}done"
    template = CampaignTemplate.compile(campaign(body_text=text), Mailing.of(make_settings()))
    results: list[bool] = []

    def render_many() -> None:
        for _ in range(8):
            try:
                results.append(b"done" in template.render(1, "jane@example.org", "Jane"))
            except ValueError:
                results.append(False)

    threads = [threading.Thread(target=render_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 32


def test_a_render_past_its_cpu_time_fails_with_its_own_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last guard, for what the steps would count wrong: here a budget's worth of loop items."""
    template = CampaignTemplate.compile(
        campaign(body_text="{% for i in range(99000) %}{% endfor %}done"), Mailing.of(make_settings())
    )
    assert b"done" in template.render(1, "jane@example.org", "Jane")
    monkeypatch.setattr(sandbox, "MAX_SECONDS", 0.001)
    with pytest.raises(templates.RenderError, match=r"^took more than 0.001 s of CPU time to render$"):
        template.render(1, "jane@example.org", "Jane")
