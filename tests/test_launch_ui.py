"""`kit launch` (and `make run`) in a terminal: each finished cell's line keeps its name.

The fake Docker client of test_launch_run plays the container; its journal feeds the
launcher's rich UI, which writes to a fake terminal (a console that believes it is one).
A tiny screen model replays what a terminal does with the output (carriage return,
cursor up, erase line) so the test reads what the user would see.
"""

from __future__ import annotations

import io
import re

from rich.console import Console

from kit.launch.ui import RichLaunchUI
from test_launch_run import CELLS, JOURNAL, FakeClient, FakeContainer, _launch, results  # noqa: F401 (fixture)

_CSI = re.compile(r"\x1b\[(\??)(\d*)((?:;\d+)*)([A-Za-z])")


def screen(raw: str) -> list[str]:
    """The lines a terminal shows after ``raw`` (the control codes rich's live display uses)."""
    lines, row, col, i = [""], 0, 0, 0
    while i < len(raw):
        m = _CSI.match(raw, i) if raw[i] == "\x1b" else None
        if m:
            code, n = m.group(4), int(m.group(2) or 1)
            if code == "A":
                row = max(0, row - n)
            elif code == "B":
                row += n
            elif code == "K":
                lines[row] = "" if m.group(2) == "2" else lines[row][:col]
            elif code == "G":
                col = n - 1
            i = m.end()
            while len(lines) <= row:
                lines.append("")
            continue
        ch = raw[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
            while len(lines) <= row:
                lines.append("")
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + ch + line[col + 1:]
            col += 1
        i += 1
    return lines


def test_screen_model_erases_what_a_live_display_moves_over():
    assert screen("a\nbar\r\x1b[2K\x1b[1A\x1b[2Kb\n") == ["b", ""]


def test_each_finished_cell_keeps_its_name_on_a_terminal(results):  # noqa: F811
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100, color_system="standard", highlight=False)
    client = FakeClient(lambda r: FakeContainer(r, JOURNAL))
    out = _launch(results, client, gpu="1", stack="cuda12", skip_checks=True, ui=RichLaunchUI(console))
    assert out.exit_code == 0
    shown = screen(buf.getvalue())
    for cell in CELLS:
        assert any(line.startswith(f"{cell}: 1,234 images/s") for line in shown), "\n".join(shown)
