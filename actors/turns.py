"""Accounts take turns in the claim (docs/design.md#sending-budget "Accounts take turns"): a deficit round robin
over the accounts with due work, messages or a sending campaign's rows.

Each pass of the claimer credits every such account a quantum, the installation's claim for a pass (its rate's
horizon of slots, else a batch) divided among them, and serves them in turn; an account claims at most its
credit, messages before its campaigns' rows. The first of a pass in which anything was claimed goes last in the
next: when the pace has room for only the first claim of a pass, the accounts take that place in turn. Credit left
unspent is kept up to HEAD_START quanta: with 1, none, so no account is ever more than a quantum ahead of another
(a larger HEAD_START lets an account that lost its turns to the pace catch up, by taking the others' turns).
"""

import math
from collections.abc import Iterable

HEAD_START = 1  # quanta of credit an account may hold


def quantum(capacity: int, accounts: int) -> int:
    """Each account's share of a pass's `capacity` rows, at least one."""
    return max(1, math.ceil(capacity / max(1, accounts)))


class Turns:
    def __init__(self) -> None:
        self.order: list[int] = []  # the accounts, the next pass's first first
        self.credit: dict[int, int] = {}
        self.quantum = 1
        self.claimed = False  # something was claimed in this pass: the next starts with the next account

    def round(self, accounts: Iterable[int], capacity: int) -> list[int]:
        """The accounts with due work in this pass's order, each credited its quantum of `capacity`. The first of
        a pass in which anything was claimed goes last in the next (a pass that found the pace's slots taken
        changes nothing): the slots freed while the claimer waited go to each account in turn."""
        due = list(dict.fromkeys(accounts))
        if self.claimed and self.order:
            self.order.append(self.order.pop(0))
        self.claimed = False
        known, wanted = set(self.order), set(due)
        self.order = [a for a in self.order if a in wanted] + [a for a in due if a not in known]
        self.quantum = quantum(capacity, len(self.order))
        self.credit = {a: min(self.credit.get(a, 0) + self.quantum, HEAD_START * self.quantum) for a in self.order}
        return list(self.order)

    def left(self, account: int) -> int:
        """What the account may still claim this pass (one new to the turns: a quantum)."""
        if account not in self.credit:
            self.credit[account] = self.quantum
            self.order.append(account)
        return self.credit[account]

    def spend(self, account: int, n: int) -> None:
        """The account claimed `n` rows."""
        if n > 0:
            self.credit[account] = max(0, self.credit.get(account, 0) - n)
            self.claimed = True
