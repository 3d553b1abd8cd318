"""The progress bar draws only on a terminal and never with --quiet."""

from __future__ import annotations

import io

from piece_by_piece_serialize.cli._progress import Progress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_draws_on_a_terminal_and_clears_at_the_end():
    stream = FakeTerminal()
    with Progress(1000, "checking", stream=stream) as progress:
        for _ in range(1000):
            progress.advance()
    out = stream.getvalue()
    assert out.count("\r") == 101  # 100 redraws (one per 1%) and the final clear
    assert "checking [##############################] 1000/1000" in out
    assert out.endswith("\r\x1b[2K")


def test_quiet_and_pipes_stay_silent():
    for stream, quiet in ((FakeTerminal(), True), (io.StringIO(), False)):
        with Progress(50, "x", stream=stream, quiet=quiet) as progress:
            for _ in range(50):
                progress.advance()
        assert stream.getvalue() == ""
