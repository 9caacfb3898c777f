"""Real bounces and how einmal's parser reads them: `python -m tests.support.bounce_samples`.

Each set is a directory of messages under tests/inbound/samples/ with an ``expected.json``: for a
file, its class (hard: a permanent failure, soft: a temporary one, none: not a bounce), the
recipients it names and, where the sample says it plainly, the reason. The flufl set is
flufl.bounce 6.0.0's samples (Apache-2.0, its LICENSE beside them) with the verdicts of its
``tests/test_detectors.py`` (permanent: hard, temporary: soft, "not a bounce": none); the postfix
set was written by a real Postfix (tests/inbound/samples/postfix/generate.py), the exim set by a real
Exim (tests/inbound/samples/exim/generate.py: refusals at MAIL FROM, at RCPT, at the end of DATA), the
opensmtpd set by a real OpenSMTPD 6.8 given the same refusals (tests/inbound/samples/opensmtpd/generate.py, with
the warnings and expiry notices of its temporary failures), and the sisimai set is real OpenSMTPD, qmail and
Amazon WorkMail bounces from Sisimai's corpus with Sisimai's verdicts (tests/inbound/samples/sisimai/README.md).
"""

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from service.addresses import email_key

SAMPLES = Path(__file__).resolve().parent.parent / "inbound" / "samples"
SETS = ("flufl", "postfix", "exim", "opensmtpd", "sisimai")


def expected(name: str) -> dict[str, dict]:
    return json.loads((SAMPLES / name / "expected.json").read_text())


def message(name: str, file: str) -> bytes:
    return (SAMPLES / name / file).read_bytes()


def key(address: str) -> str:
    try:
        return email_key(address)
    except ValueError:
        return address.lower()


@dataclass
class Verdict:
    kind: str  # hard, soft, complaint, unclassified, none, or refused (Malformed)
    recipients: set[str]
    reasons: set[str]
    suppresses: bool  # a report of it suppresses its address at once


def read(parse: Callable, data: bytes) -> Verdict:
    try:
        found = parse(data)
    except Exception as exc:  # Malformed, or a parser that raises
        return Verdict("refused" if type(exc).__name__ in ("Malformed", "TooLarge") else "crash", set(), set(), False)
    kinds = [r.kind for r in found]
    kind = next((k for k in ("hard", "soft", "complaint", "unclassified") if k in kinds), "none")
    return Verdict(
        kind,
        {key(r.recipient) for r in found if r.recipient},
        {getattr(r, "reason", None) or "-" for r in found},
        any(r.effect() == "suppress" if hasattr(r, "effect") else r.kind in ("hard", "complaint") for r in found),
    )


@dataclass
class Score:
    classes: int = 0
    classes_right: int = 0
    recipients: int = 0
    recipients_right: int = 0
    reasons: int = 0
    reasons_right: int = 0
    not_bounces_hard: int = 0  # auto-replies and other mail classed as a hard bounce
    wrongly_suppressing: int = 0  # soft, policy, content or authentication bounces that would suppress
    wrong: list[str] = field(default_factory=list)


ADDRESS_REASONS = ("no_mailbox", "no_domain", "disabled")


def score(name: str, parse: Callable) -> Score:
    result = Score()
    for file, want in expected(name).items():
        got = read(parse, message(name, file))
        result.classes += 1
        right = got.kind == want["class"]
        result.classes_right += right
        if want["recipients"]:
            result.recipients += 1
            if got.recipients == {key(a) for a in want["recipients"]}:
                result.recipients_right += 1
            else:
                result.wrong.append(f"{file}: recipients {sorted(got.recipients)}, not {want['recipients']}")
        if want.get("reason"):
            result.reasons += 1
            result.reasons_right += got.reasons == {want["reason"]}
        if not right:
            result.wrong.append(f"{file}: {got.kind}, not {want['class']}")
        if want["class"] == "none" and got.kind == "hard":
            result.not_bounces_hard += 1
        if got.suppresses and (
            want["class"] == "soft"
            or want.get("reason", "no_mailbox") not in ADDRESS_REASONS
            or want.get("not_address")
        ):
            result.wrongly_suppressing += 1
            result.wrong.append(f"{file}: would suppress its address")
    return result


def line(name: str, s: Score) -> str:
    reasons = f", reason right {s.reasons_right}/{s.reasons}" if s.reasons else ""
    return (
        f"{name}: class right {s.classes_right}/{s.classes} ({100 * s.classes_right / s.classes:.0f} %), "
        f"recipient right {s.recipients_right}/{s.recipients} "
        f"({100 * s.recipients_right / max(1, s.recipients):.0f} %){reasons}; not bounces classed hard "
        f"{s.not_bounces_hard}, suppressing wrongly {s.wrongly_suppressing}"
    )


def main(argv: list[str]) -> int:
    from service.inbound import bounces

    for name in SETS:
        if not (SAMPLES / name / "expected.json").exists():
            continue
        s = score(name, bounces.parse)
        print(line(name, s))
        if "-v" in argv:
            print("\n".join("  " + w for w in s.wrong))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
