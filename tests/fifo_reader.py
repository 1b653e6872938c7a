"""A FIFO read in one open by a thread: what a program that writes its output there delivered."""
import contextlib
import os
import threading
import time


@contextlib.contextmanager
def fifo_reader(path):
    """Makes the FIFO `path` and reads it until its writer closes; yields a list that holds the
    bytes once the block is left (empty bytes if no writer came)."""
    os.mkfifo(path)
    got = []

    def read_once():
        with open(path, "rb") as f:
            got.append(f.read())
    # A daemon: a reader still waiting for a writer never keeps the test process alive.
    reader = threading.Thread(target=read_once, daemon=True)
    reader.start()
    try:
        yield got
    finally:
        # No writer came: open as one until the reader is there to see it (ENXIO before), so that
        # it returns.
        deadline = time.monotonic() + 10
        while reader.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(0.1)
