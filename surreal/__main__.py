"""`python -m surreal`; Ctrl-C while the CLI loads ends in one line, not a traceback."""

import os
import signal
import sys


def _interrupted(*_: object) -> None:
    print("interrupted: the run was not started (nothing runs)", file=sys.stderr, flush=True)
    os._exit(130)


_before = signal.signal(signal.SIGINT, _interrupted)  # the CLI loads in ~1 s on a busy machine
from surreal.cli import main  # noqa: E402

signal.signal(signal.SIGINT, _before)

# Guarded: multiprocessing's spawn (the DataFetcher's workers) re-imports the main module.
if __name__ == "__main__":
    main()
