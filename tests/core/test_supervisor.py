"""The supervisor restarts one failed actor alone and gives up past its limit; a failure that only says
the database is unreachable is restarted without counting toward the limit, and logged once."""

import logging

import anyio
import pytest
from anyio.abc import TaskStatus

from actors.supervisor import Child, GaveUp, Supervisor
from service import db
from service.errors import DatabaseUnavailable

pytestmark = pytest.mark.anyio


async def test_a_failed_actor_is_restarted_alone() -> None:
    starts = {"steady": 0, "flaky": 0}
    done = anyio.Event()

    async def steady(*, task_status: TaskStatus[None]) -> None:
        starts["steady"] += 1
        task_status.started()
        await anyio.sleep_forever()

    async def flaky(*, task_status: TaskStatus[None]) -> None:
        starts["flaky"] += 1
        task_status.started()
        if starts["flaky"] < 3:
            raise ConnectionError("database went away")
        done.set()
        await anyio.sleep_forever()

    supervisor = Supervisor(intensity=5, period=10, backoff=0.01)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(supervisor.run, [Child("steady", steady), Child("flaky", flaky)])
            await done.wait()
            tg.cancel_scope.cancel()
    assert starts == {"steady": 1, "flaky": 3}
    assert supervisor.restarts == {"flaky": 2}


async def test_children_start_in_order_each_once_ready() -> None:
    order: list[str] = []

    def child(name: str):
        async def run(*, task_status: TaskStatus[None]) -> None:
            await anyio.sleep(0.01)
            order.append(name)
            task_status.started()
            await anyio.sleep_forever()

        return Child(name, run)

    with anyio.move_on_after(0.5):
        await Supervisor().run([child("listener"), child("scheduler"), child("sender")])
    assert order == ["listener", "scheduler", "sender"]


async def test_a_crash_loop_gives_up_naming_the_actor_and_the_reason() -> None:
    async def crashing(*, task_status: TaskStatus[None]) -> None:
        raise ValueError("bad SMTP credentials")

    supervisor = Supervisor(intensity=3, period=10, backoff=0.001)
    with anyio.fail_after(5), pytest.raises(BaseExceptionGroup) as caught:
        await supervisor.run([Child("sender", crashing)])
    gave_up = caught.value.exceptions[0]
    assert isinstance(gave_up, GaveUp)
    assert str(gave_up) == "actor sender failed 4 times within 10s, giving up: ValueError: bad SMTP credentials"


async def test_states_show_a_restarting_actor_and_each_restart_is_reported() -> None:
    restarted: list[str] = []
    runs = 0

    async def steady(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await anyio.sleep_forever()

    async def fails_once(*, task_status: TaskStatus[None]) -> None:
        nonlocal runs
        runs += 1
        task_status.started()
        if runs == 1:
            raise ConnectionError("database went away")
        await anyio.sleep_forever()

    supervisor = Supervisor(intensity=5, period=10, backoff=0.5, on_restart=restarted.append)
    async with anyio.create_task_group() as tg:
        tg.start_soon(supervisor.run, [Child("steady", steady), Child("flaky", fails_once)])
        with anyio.fail_after(10):
            while supervisor.not_running() != "flaky (restarting)":
                await anyio.sleep(0.001)
            assert restarted == ["flaky"]
            while supervisor.not_running() is not None:
                await anyio.sleep(0.01)
        assert supervisor.states == {"steady": "running", "flaky": "running"}
        tg.cancel_scope.cancel()


async def test_an_unreachable_database_never_makes_it_give_up_and_is_logged_once(caplog) -> None:
    runs = 0
    running = anyio.Event()

    async def listener(*, task_status: TaskStatus[None]) -> None:
        nonlocal runs
        runs += 1
        if runs <= 8:  # four times the limit
            raise (
                ConnectionRefusedError(111, "Connection refused")
                if runs % 2
                else DatabaseUnavailable("cannot reach PostgreSQL at 127.0.0.1:5432/einmal: [Errno 111] refused")
            )
        task_status.started()
        running.set()
        await anyio.sleep_forever()

    supervisor = Supervisor(intensity=2, period=10, backoff=0.001, max_backoff=0.002, passing=db.unreachable)
    with caplog.at_level(logging.INFO, logger="einmal.supervisor"), anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(supervisor.run, [Child("listener", listener)])
            await running.wait()
            tg.cancel_scope.cancel()
    assert runs == 9
    assert supervisor.restarts == {"listener": 8}
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0] == (
        "actor listener failed (ConnectionRefusedError: [Errno 111] Connection refused); "
        "restarting every 0.002s at most until it runs again"
    )
    assert lines[1].startswith("actor listener running again after ") and lines[1].endswith(" and 8 tries")


async def test_a_crash_still_counts_between_failures_of_an_unreachable_database() -> None:
    runs = 0

    async def sender(*, task_status: TaskStatus[None]) -> None:
        nonlocal runs
        runs += 1
        if runs <= 5:
            raise ConnectionRefusedError(111, "Connection refused")
        raise ValueError("bad SMTP credentials")

    supervisor = Supervisor(intensity=2, period=10, backoff=0.001, max_backoff=0.002, passing=db.unreachable)
    with anyio.fail_after(5), pytest.raises(BaseExceptionGroup) as caught:
        await supervisor.run([Child("sender", sender)])
    assert runs == 8
    assert str(caught.value.exceptions[0]) == (
        "actor sender failed 3 times within 10s, giving up: ValueError: bad SMTP credentials"
    )


@pytest.mark.parametrize(
    ("error", "passes"),
    [
        (ConnectionRefusedError(111, "Connection refused"), True),
        (TimeoutError(), True),
        (db.DatabaseConnectionLost("the scheduler's connection to PostgreSQL was closed under it"), True),
        (ExceptionGroup("pipeline", [db.DatabaseStalled("no answer"), ConnectionResetError(104, "reset")]), True),
        (OSError(24, "Too many open files"), False),
        (ValueError("bad SMTP credentials"), False),
        (ExceptionGroup("pipeline", [ConnectionResetError(104, "reset"), KeyError("row")]), False),
    ],
)
def test_only_an_outage_passes(error: BaseException, passes: bool) -> None:
    assert db.unreachable(error) is passes


async def test_a_child_not_yet_started_keeps_the_node_not_running() -> None:
    """Children start one after another: while the first is still starting, the last has not begun, and the
    node must not look ready for want of its name (before: not_running() named only children begun)."""
    release = anyio.Event()

    async def slow(*, task_status: TaskStatus[None]) -> None:
        await release.wait()
        task_status.started()
        await anyio.sleep_forever()

    async def quick(*, task_status: TaskStatus[None]) -> None:
        task_status.started()
        await anyio.sleep_forever()

    supervisor = Supervisor()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(supervisor.run, [Child("slow", slow), Child("last", quick)])
            await anyio.sleep(0.05)
            assert supervisor.states == {"slow": "starting", "last": "starting"}
            release.set()
            while supervisor.not_running() is not None:
                await anyio.sleep(0.01)
            assert supervisor.states == {"slow": "running", "last": "running"}
            tg.cancel_scope.cancel()
