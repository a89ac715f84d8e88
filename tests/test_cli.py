"""The ``mmfast`` console script."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mmfast import bench
from mmfast.cli import main


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "bench" in capsys.readouterr().out


def test_console_script_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "mmfast", "bench", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "memory floor" in result.stdout


def test_bench_rows_measure_every_alternative():
    rows = list(bench.kernel_rows(sizes=((16, 24),)))
    assert [r.case for r in rows] == [
        "deinterleave_rgb_to_planes",
        "pad_and_normalize_to_tensor",
        "serialize_pixel_values",
    ]
    for row in rows:
        assert row.ours > 0 and all(t > 0 for t in row.others.values())
        assert "reference" in row.others and "copy floor" in row.others
        assert f"{row.ours * 1e3:9.2f}" in row.format(["reference", "tobytes", "copy floor"])
