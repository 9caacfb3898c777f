"""expected.json's classes and reasons from Sisimai's own verdicts: `python -m tests.inbound.samples.sisimai.verdicts
<rb-sisimai checkout> [--write]`.

Each sample's verdict comes from rb-sisimai's test/public/lhost-<kind>.rb (status, reply code, reason, hard bounce):
soft when its status is 4.x.x, its reason "expired", or the notice's subject a delay or warning, else hard; a reason
only for a notice of one recipient whose Sisimai reason has an einmal reason in REASONS; "not_address" when every
recipient's Sisimai reason is a refusal of the sender, its host or its content (NOT_ADDRESS). The recipients are not
derived here: they are read from each notice's Final-Recipient or recipient lines and kept as expected.json has them.
Without --write it prints the entries that differ and exits 1 when any does.
"""

import json
import re
import sys
from email import message_from_bytes, policy
from pathlib import Path

HERE = Path(__file__).resolve().parent
REASONS = {  # Sisimai's reason -> einmal's (service/inbound/reasons.py), where they mean the same
    "userunknown": "no_mailbox",
    "hostunknown": "no_domain",
    "mailboxfull": "mailbox_full",
    "expired": "expired",
    "authfailure": "authentication",
}
# Sisimai's reasons for a refusal of the sender, its host or its content: einmal names these sender, policy or
# content by the server's words, but never an address reason ("not_address": the report must not suppress)
NOT_ADDRESS = ("rejected", "blocked", "badreputation", "requireptr", "filtered")
ROW = re.compile(r"\['([0-9.]+)',\s*'(\d*)',\s*'(\w+)',\s*(true|false)\]")


def sisimai(checkout: Path, kind: str) -> dict[str, list[tuple[str, str]]]:
    """Each sample number of lhost-<kind> and its (status, reason) per recipient."""
    text = (checkout / "test" / "public" / f"lhost-{kind}.rb").read_text()
    found = {}
    for number, rows in re.findall(r"'(\d\d)'\s*=>\s*\[(.*?)\]\],", text, re.DOTALL):
        found[number] = [(status, reason) for status, _code, reason, _hard in ROW.findall(rows + "]")]
    return found


def verdict(sample: Path, rows: list[tuple[str, str]]) -> dict:
    subject = str(message_from_bytes(sample.read_bytes(), policy=policy.compat32).get("Subject", ""))
    soft = any(s.startswith("4.") or r == "expired" for s, r in rows) or re.search(
        r"delay|warning", subject, re.IGNORECASE
    )
    found: dict = {"class": "soft" if soft else "hard"}
    if len(rows) == 1 and rows[0][1] in REASONS:
        found["reason"] = REASONS[rows[0][1]]
    if rows and all(r in NOT_ADDRESS for _s, r in rows):
        found["not_address"] = True
    return found


def main(argv: list[str]) -> int:
    checkout, write = Path(argv[0]), "--write" in argv
    expected = json.loads((HERE / "expected.json").read_text())
    verdicts: dict[str, dict] = {}
    for kind in sorted({f.split("-")[1] for f in expected}):
        for number, rows in sisimai(checkout, kind).items():
            verdicts[f"lhost-{kind}-{number}.eml"] = rows
    differ = 0
    for file, entry in expected.items():
        got = verdict(HERE / file, verdicts[file])
        want = {k: v for k, v in entry.items() if k != "recipients"}
        if got != want:
            differ += 1
            print(f"{file}: {want} -> {got}")
        expected[file] = {"class": got.pop("class"), "recipients": entry["recipients"], **got}
    if write:
        lines = [f"  {json.dumps(f)}: {json.dumps(expected[f])}" for f in sorted(expected)]
        (HERE / "expected.json").write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return 1 if differ and not write else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
