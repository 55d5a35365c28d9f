"""User code that fails (a custom learner file, its `make_policy`): one paragraph, not a traceback.

The paragraph names the file and line in the user's code and the error; the full traceback goes
to a temporary log file whose path the paragraph gives.
"""

from __future__ import annotations

import tempfile
import traceback
from pathlib import Path


def describe_failure(where: str | Path, err: BaseException) -> str:
    """One paragraph: `<where> failed: <file>:<line>: <Error>: <message>` and the traceback's path.

    For a SyntaxError the location is the offending line; otherwise it is the innermost frame of
    the traceback that lies outside this package (the user's own code), else the innermost one.
    """
    if isinstance(err, SyntaxError):
        location = f"{err.filename}:{err.lineno}"
        message = f"SyntaxError: {err.msg}"
        if err.text:
            message += f" (in `{err.text.strip()[:80]}`)"
    else:
        frames = traceback.extract_tb(err.__traceback__)
        package = str(Path(__file__).resolve().parent)
        own = [f for f in frames if not f.filename.startswith(package)] or frames
        location = f"{own[-1].filename}:{own[-1].lineno}" if own else str(where)
        message = f"{type(err).__name__}: {err}"
    log = _write_traceback(err)
    tail = f" (full traceback: {log})" if log else ""
    return f"{where} failed at {location}: {message}{tail}. Fix the code and launch again."


def _write_traceback(err: BaseException) -> str | None:
    """The full traceback in a temporary file (outside any run folder); its path, or None."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    try:
        with tempfile.NamedTemporaryFile(
            "w", prefix="surreal-user-code-", suffix=".log", delete=False
        ) as out:
            out.write(text)
            return out.name
    except OSError:
        return None
