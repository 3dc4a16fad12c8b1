"""The differential fuzz of issue 28 in the suite: random lines caliban understands run in
real bash in a scratch directory (``benchmarks/shell_fuzz.py``), and every file they wrote
must be one caliban's decision checked. Seeded, a few hundred lines; the 10,000-line run is
the benchmark."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from shell_fuzz import BASH, Outcome, campaign

pytestmark = pytest.mark.slow

LINES = int(os.environ.get("CALIBAN_SHELL_FUZZ_LINES", "200"))
SEED = int(os.environ.get("CALIBAN_SHELL_FUZZ_SEED", "2028"))


def test_no_understood_line_writes_a_file_caliban_did_not_check(tmp_path: Path) -> None:
    if not os.access(BASH, os.X_OK):
        pytest.skip("needs bash")
    total = Outcome()
    for outcome in campaign(LINES, SEED, tmp_path):
        total.add(outcome)
    assert total.unchecked == []
    # Not vacuous: most lines are understood and ran.
    assert total.understood > LINES // 2
    assert total.ran >= total.understood - 2
