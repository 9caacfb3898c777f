"""Live progress without polling storms (service/console/live.py): however many ask, one load of a campaign per
FRESH_SECONDS; a session is answered PER_SESSION fragments per POLL_SECONDS, then 429 until its bucket refills,
while another session is answered."""

import anyio
import asyncpg
import pytest

from service.console.live import FRESH_SECONDS, PER_SESSION, POLL_SECONDS, Live
from service.console.views import Progress, paced
from tests.support.console import accounts, sending_campaign, signed_in
from tests.support.web import http_server

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_is_answered_its_share_of_fragments_then_refused_until_its_bucket_refills() -> None:
    clock = Clock()
    live: Live[int] = Live(clock)
    assert [live.allowed(1) for _ in range(PER_SESSION + 3)] == [True] * PER_SESSION + [False] * 3
    assert live.allowed(2)  # another session: its own bucket
    clock.now += POLL_SECONDS / PER_SESSION * 2.5  # two fragments and a half
    assert [live.allowed(1) for _ in range(3)] == [True, True, False]


async def test_many_askers_share_one_load_and_get_the_kept_one_while_it_loads_again_behind() -> None:
    clock = Clock()
    live: Live[int] = Live(clock)
    loads = []

    async def load() -> int:
        loads.append(clock.now)
        await anyio.sleep(0.05)  # the snapshot's query: the others wait for it rather than ask too
        return len(loads)

    seen: list[int] = []

    async def ask() -> None:
        seen.append(await live.get(7, load))

    async with anyio.create_task_group() as tg:
        for _ in range(100):
            tg.start_soon(ask)
    assert seen == [1] * 100 and len(loads) == 1
    clock.now += FRESH_SECONDS / 2
    assert await live.get(7, load) == 1
    clock.now += FRESH_SECONDS
    async with anyio.create_task_group() as tg:  # stale: the answer kept, while one load runs in the background
        for _ in range(5):
            tg.start_soon(ask)
    assert seen[100:] == [1] * 5 and len(loads) == 2
    await anyio.sleep(0.2)  # the load again done
    assert await live.get(7, load) == 2 and live.refreshing == {}
    assert await live.get(8, load) == 3 and len(loads) == 3
    assert live.loading == {}  # no lock kept once its load is done


@pytest.mark.serial
async def test_the_progress_route_refuses_a_session_past_its_share(conn: asyncpg.Connection, dsn: str) -> None:
    await accounts(conn, "acme")
    campaign = await sending_campaign(conn, "acme", "Spring")
    async with http_server(dsn) as base:
        async with signed_in(base, "acme-member") as greedy, signed_in(base, "acme-member") as other:
            path = f"/console/campaigns/{campaign}/progress"
            answers = [await greedy.get(path, headers={"HX-Request": "true"}) for _ in range(40)]
            codes = [a.status_code for a in answers]
            # its share at once, then about one a fragment's worth of time (POLL_SECONDS / PER_SESSION)
            assert codes[:PER_SESSION] == [200] * PER_SESSION and codes.count(429) >= 5, codes
            refused = next(a for a in answers if a.status_code == 429)
            assert refused.headers["retry-after"] == str(int(POLL_SECONDS)) and "too often" in refused.text
            assert (await other.get(path)).status_code == 200  # its own session


async def test_an_answer_kept_longer_than_oldest_is_loaded_again_before_it_is_shown() -> None:
    clock = Clock()
    live: Live[int] = Live(clock, oldest=POLL_SECONDS)
    loads: list[float] = []

    async def load() -> int:
        loads.append(clock.now)
        return len(loads)

    assert await live.get(7, load) == 1 and live.kept(7) == 1
    clock.now += POLL_SECONDS - 0.1  # stale, not too old: kept, loaded again behind
    assert await live.get(7, load) == 1
    await anyio.sleep(0.05)
    assert live.kept(7) == 2 and len(loads) == 2
    clock.now += POLL_SECONDS  # nobody asked meanwhile: loaded now
    assert await live.get(7, load) == 3 and live.kept(8) is None


def test_a_sending_campaigns_pace_is_its_messages_done_between_two_loads_a_minute() -> None:
    first = Progress(7, "sending", sent=100, failed=2, in_doubt=0, total=1000, at=50.0)
    later = Progress(7, "sending", sent=280, failed=4, in_doubt=1, total=1000, at=56.0)
    assert paced(None, first).per_minute is None  # one load: no pace yet
    assert paced(first, later).per_minute == (280 + 4 + 1 - 102) * 60 // 6  # 1,830 a minute
    assert paced(later, later).per_minute is None  # the same load again: no time between them
    other = Progress(8, "sending", sent=0, failed=0, in_doubt=0, total=10, at=57.0)
    assert paced(later, other).per_minute is None  # another campaign's load says nothing of this one's pace
