"""--threads holds numpy's BLAS to that many threads too (its default, a thread per core, spins on busy cores)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from meteora_edge.cli.main import main

threadpoolctl = pytest.importorskip("threadpoolctl")


def blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"}


@pytest.mark.parametrize("threads", ["2", "1"])
def test_threads_limits_numpy_s_blas(tmp_path, threads):
    if not blas_threads():
        pytest.skip("numpy has no BLAS that threadpoolctl can see")
    (tmp_path / "docs.json").write_text(json.dumps(["either party may terminate", "fees are due monthly"]))
    built = CliRunner().invoke(main, ["index", "build", str(tmp_path / "docs.json"), "--out", str(tmp_path / "ix")])
    assert built.exit_code == 0, built.output
    result = CliRunner().invoke(main, ["index", "search", str(tmp_path / "ix"), "-q", "terminate", "--threads", threads])
    assert result.exit_code == 0, result.output
    assert blas_threads() == {int(threads)}
