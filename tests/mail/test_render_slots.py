"""The render threads are shared between accounts (service/mail/slots.py): an account whose renders take their
time holds its share of them, never all, and another account's render goes through meanwhile."""

import threading

import anyio
import pytest

from service.mail.slots import RenderSlots

pytestmark = pytest.mark.anyio


async def test_one_accounts_slow_renders_leave_another_account_its_slot() -> None:
    slots = RenderSlots(threads=2, share=1)
    release = threading.Event()
    started: list[int] = []

    def slow(account: int) -> int:
        started.append(account)
        release.wait(10)
        return account

    done: list[int] = []

    async def render(account: int, function) -> None:
        done.append(await slots.run(account, function, account))

    async with anyio.create_task_group() as tg:
        for _ in range(3):  # three of account 1's: one runs, two wait in its line
            tg.start_soon(render, 1, slow)
        await anyio.sleep(0.2)
        assert started == [1]
        with anyio.fail_after(5):  # account 2's goes through while account 1's waits
            assert await slots.run(2, lambda account: account, 2) == 2
        release.set()
    assert done == [1, 1, 1] and slots.accounts == {}
