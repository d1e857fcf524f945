"""Progress bars of the subcommands (sackli/cli/_progress.py), on a
pseudo-terminal."""

from __future__ import annotations

import pytest

from cli_helpers import on_terminal, write_bag  # registered by conftest.py


# --- progress bars ------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["info", "p.bagz"], "info"),
        (["verify", "p.bagz"], "verify"),
        (["cat", "p.bagz"], "cat"),
        (["head", "p.bagz", "-n", "1000"], "head"),
        (["convert", "p.bagz", "p.tfrecord.gz"], "convert"),
        (["convert", "p.bagz", "p@3.bag"], "convert"),
    ],
)
def test_progress_bars_show_a_total_and_an_eta_on_a_terminal(tmp_path, args, label) -> None:
    write_bag(tmp_path / "p.bagz", (b"%d" % i for i in range(3000)))
    status, _, shown = on_terminal(*args, cwd=tmp_path)
    assert status == 0, shown
    total = "1,000" if label == "head" else "3,000"
    # The first frame: no progress yet, so the ETA after "<" is still "?".
    assert f"{label}:   0%|" in shown and f"| 0/{total} [00:00<?, ? records/s]" in shown
    assert shown.endswith("\r")  # the bar is erased when done


def test_no_progress_bar_when_records_go_to_the_terminal(tmp_path) -> None:
    write_bag(tmp_path / "p.bagz", [b"only"])
    status, _, shown = on_terminal("cat", "p.bagz", cwd=tmp_path, stdout_on_terminal=True)
    assert (status, shown) == (0, "only\r\n")


def test_convert_from_a_file_of_unknown_length_counts_its_bytes(tmp_path) -> None:
    # The record count is unknown until the end: the bar counts the file's
    # bytes, out of its size (more in tests/cli/test_cli_streams.py).
    (tmp_path / "in.txt").write_bytes(b"a\nb\n")
    status, _, shown = on_terminal("convert", "in.txt", "out.bag", cwd=tmp_path)
    assert status == 0, shown
    assert "convert:   0%|" in shown and "| 0.00B/4.00B [00:00<?, ?B/s]" in shown
