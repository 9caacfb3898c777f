"""The tests' fork server (tests/support/forkserver.py) outlives what would leave later tests refused."""

import os
import socket

import pytest

from tests.support import forkserver

pytestmark = pytest.mark.skipif(not forkserver.ENABLED, reason="TESTS_FORKSERVER=0: no fork server")


def version() -> str:
    return forkserver.run(["--version"], env=dict(os.environ), input=None, timeout=60).stdout


def test_a_server_that_no_longer_listens_is_replaced_and_the_command_runs() -> None:
    first = version()
    assert first.startswith("einmal"), first
    server, path = forkserver._server, forkserver._path
    assert server is not None and path is not None
    # what a test saw as its server went down: the process not yet gone, its socket refusing connections
    os.unlink(path)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    try:
        assert version() == first
    finally:
        dead.close()
    assert forkserver._server is not None and forkserver._server.pid != server.pid
    assert server.poll() is not None, "the old server was stopped"
