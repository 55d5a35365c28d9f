"""What every CLI of the project promises for a usage error: exit 2, one `Error: ...` line."""

from __future__ import annotations

import subprocess


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, `Error: ...` as the only line on stderr (naming each of `words`), no traceback;
    returns that line."""
    both = result.stdout + result.stderr
    assert result.returncode == 2, both
    assert "Traceback" not in both, both
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), both
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]
