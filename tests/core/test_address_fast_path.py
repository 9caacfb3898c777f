"""The quick answers of service/addresses.py are the full ones: for every text, `address_problem` says what
email_validator says of it whole, and `email_key` is the key the module's rules make (idna, Unicode
folding), whether or not the text took the fast path of a plain ASCII address."""

import string

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from service import addresses

LOCAL = string.ascii_letters + string.digits + "._+-"
LDH = string.ascii_letters + string.digits + "-"
# the last labels email_validator treats apart (special-use, test, numeric, A-labels) and ordinary ones
ENDINGS = [
    "test",
    "local",
    "LOCALHOST",
    "invalid",
    "onion",
    "arpa",
    "home.arpa",
    "example",
    "org",
    "123",
    "xn--bcher-kva",
    "Xn--x",
    "a-",
    "-a",
    "ab--cd",
]
ODD = [
    "ü",
    "ß",
    "\u0301",
    "İ",
    "K",
    "\u3002",
    "ｂ",
    " ",
    '"',
    "<",
    ">",
    "(",
    "\\",
    "\0",
    "\n",
    "@",
    "..",
    "#",
    "!",
    "é",
]


def labels(alphabet: str, most: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=0, max_size=most)


# addresses built as plain ones are, lengths near the limits (64 for the local part, 63 for a label, 254 in
# all), with odd characters and endings mixed in
plainish = st.builds(
    lambda local, labels_, ending, odd, where: _spoilt(f"{local}@{'.'.join([*labels_, ending])}", odd, where),
    st.one_of(labels(LOCAL, 8), labels(LOCAL, 70)),
    st.lists(st.one_of(labels(LDH, 6), labels(LDH, 66)), max_size=5),
    st.one_of(st.sampled_from(ENDINGS), labels(LDH, 10)),
    st.one_of(st.none(), st.sampled_from(ODD)),
    st.integers(min_value=0, max_value=300),
)
anything = st.lists(st.sampled_from([*LOCAL, *ODD, "@", "xn--", "XN--", "."]), max_size=30).map("".join)
ADDRESSES = st.one_of(plainish, anything, st.text(max_size=30))


def _spoilt(address: str, odd: str | None, where: int) -> str:
    if odd is None:
        return address
    at = where % (len(address) + 1)
    return address[:at] + odd + address[at:]


@settings(max_examples=3000, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(ADDRESSES)
@example("a" * 65 + "@example.org")  # email_validator holds the local part to 64 only when strict
@example("a@" + ".".join(["b" * 63] * 3) + "." + "c" * 60)  # 254 characters: the most
@example("ab@" + ".".join(["b" * 63] * 3) + "." + "c" * 60)  # 255, its domain fine
@example("a" * 190 + "@" + "b" * 54 + ".localhost")  # 255 characters, 250 once `localhost` is read as `test`
@example("a@" + "b" * 64 + ".org")
@example("x@localhost")
@example("x@foo.home.arpa")
@example("x@ab--cd.example")
@example("x@a.-b.org")
@example("x@a.b.123")
@example("x.@a.org")
@example(".x@a.org")
@example("x..y@a.org")
def test_the_fast_path_answers_as_the_full_check(address: str) -> None:
    assert addresses.address_problem(address) == addresses._problem(address)
    assert addresses.email_key(address) == addresses._key(address)


def test_a_plain_address_takes_the_fast_path_and_the_domain_is_asked_once() -> None:
    addresses._domain_taken.cache_clear()
    for i in range(100):
        assert addresses.address_problem(f"user.{i}+tag@Mail.Example.org") is None
    assert addresses._domain_taken.cache_info().misses == 1
    assert addresses.address_problem("user@-mail.example.org") == addresses._problem("user@-mail.example.org")
    assert addresses.address_problem("user@-mail.example.org") is not None
