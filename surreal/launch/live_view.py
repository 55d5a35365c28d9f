"""The live panel of `surreal launch` on a terminal (`rich`, the `rl` extra): loaded only when
stdout is a TTY; `surreal.launch.progress_view.PlainView` writes plain lines otherwise."""

from __future__ import annotations

import time
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.panel import Panel
from rich.table import Table


class LiveView:
    """A `rich` live panel, redrawn in place on the terminal."""

    def __init__(self, out: TextIO, title: str) -> None:
        self.title = title
        self.started = time.monotonic()
        self.live = Live(console=Console(file=out), refresh_per_second=4, transient=False)
        self.live.start()

    def show(self, phase: str, text: str, urgent: bool = False, values: dict | None = None) -> None:
        """Redraw the panel with the phase and the values (or the phase's text alone)."""
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row("phase", phase)
        for key, value in (values or {}).items():
            table.add_row(key, value)
        if not values:
            table.add_row("", text)
        elapsed = time.monotonic() - self.started
        self.live.update(Panel(table, title=f"{self.title}  {elapsed:,.0f}s", expand=False))

    def close(self) -> None:
        """Leave the last panel on the screen."""
        self.live.stop()
