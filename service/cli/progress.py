"""The progress display of `einmal campaign status --follow` and `einmal demo`.

On a terminal it is a rich live bar redrawn in place; while it is up, log lines
that would go to the terminal go through the same rich console, which prints
them above the bar and redraws the bar under them — a log line never lands
inside the bar. Into a pipe or a file it is one plain line per poll, with no
escape codes and no carriage returns, so CI logs read top to bottom.
"""

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn
from rich.text import Text

BAR_WIDTH = 20


def isatty(stream: object) -> bool:
    check = getattr(stream, "isatty", None)
    return bool(check and check())


class ConsoleHandler(logging.Handler):
    """Writes each record, formatted as the handler it stands in for would, through a rich console."""

    def __init__(self, console: Console, replaces: logging.Handler):
        super().__init__(replaces.level)
        self.console = console
        self.setFormatter(replaces.formatter)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(Text(self.format(record)), soft_wrap=True)
        except Exception:  # logging's contract: a handler reports its own failure and never raises
            self.handleError(record)


@contextlib.contextmanager
def logs_through(console: Console) -> Iterator[None]:
    """While inside, the root logger's handlers that write to a terminal write through `console`."""
    root = logging.getLogger()
    swapped = {
        h: ConsoleHandler(console, h) for h in root.handlers if type(h) is logging.StreamHandler and isatty(h.stream)
    }
    for original, stand_in in swapped.items():
        root.handlers[root.handlers.index(original)] = stand_in
    try:
        yield
    finally:
        for original, stand_in in swapped.items():
            if stand_in in root.handlers:
                root.handlers[root.handlers.index(stand_in)] = original


class Display:
    """`show(summary, done, total)` per poll; a context manager that leaves the last bar on screen."""

    def __init__(self, out: TextIO, *, tty: bool):
        self.out, self.tty = out, tty
        self.stack = contextlib.ExitStack()
        self.progress: Progress | None = None

    def __enter__(self) -> "Display":
        if self.tty:
            console = Console(file=self.out)
            # stderr is sent through the bar's console only when it is a terminal too: `2>file` stays in the file
            self.progress = Progress(
                BarColumn(bar_width=BAR_WIDTH),
                TextColumn("{task.description}", markup=False),
                console=console,
                auto_refresh=False,
                redirect_stderr=isatty(sys.stderr),
            )
            self.task = self.progress.add_task("", total=None)
            self.stack.enter_context(self.progress)
            self.stack.enter_context(logs_through(console))
        return self

    def show(self, summary: str, done: int, total: int) -> None:
        if self.progress is None:
            self.out.write(f"[{bar(done, total)}] {summary}\n")
            self.out.flush()
            return
        self.progress.update(self.task, description=summary, completed=done, total=total or None)
        self.progress.refresh()

    def __exit__(self, *exc: object) -> None:
        self.stack.close()


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = int(done / total * width) if total else 0
    return "#" * filled + "." * (width - filled)
