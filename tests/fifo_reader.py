"""A FIFO read in one open by a thread: what a program that writes its output there delivered."""
import contextlib
import os
import threading


@contextlib.contextmanager
def fifo_reader(path):
    """Makes the FIFO `path` and reads it until its writer closes; yields a list that holds the
    bytes once the block is left (empty bytes if no writer came)."""
    os.mkfifo(path)
    got = []

    def read_once():
        with open(path, "rb") as f:
            got.append(f.read())
    reader = threading.Thread(target=read_once)
    reader.start()
    try:
        yield got
    finally:
        if reader.is_alive() and not got:  # no writer came (yet): let the reader go
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
