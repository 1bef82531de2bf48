"""`sbatch jobs/scale.sbatch` on the real two-node test cluster: sizes 1 and 2, each its own srun
step inside one allocation, weak and strong scaling; the files, and the speed-up and efficiency
recomputed from the rates each size's `tfdist train` measured (its own metrics.json)."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import WAIT
from tests.slurm.test_jobs import check_python, run

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("scaling,batches,lrs", [
    ("weak", {
        1: (32, 32),
        2: (32, 64)
    }, {
        1: 0.05,
        2: 0.1
    }),
    ("strong", {
        1: (32, 32),
        2: (16, 32)
    }, {
        1: 0.05,
        2: 0.05
    }),
])
def test_scale_sizes_1_and_2_on_two_nodes(slurm, jobdir, scaling, batches, lrs):
    job = run(slurm,
              jobdir,
              "scale.sbatch",
              "runs/study",
              "--sizes=1,2",
              "--steps=10",
              "--timed_epochs=2",
              env={"SCALING": scaling},
              timeout=WAIT)
    assert job.state == "COMPLETED", job.describe()
    assert "tfdist job: finished: every size measured" in job.log, job.describe()
    check_python(job.log)
    study_dir = jobdir / "runs" / "study"
    study = json.loads((study_dir / "scale.json").read_text())
    assert (study["scaling"], study["strategy"], study["launcher"]) == (scaling, "multi_worker",
                                                                        "srun")
    assert (study_dir / "scale.png").read_bytes()[:8] == PNG
    rows = {r["size"]: r for r in study["results"]}
    assert sorted(rows) == [1, 2] and rows[1]["layout"] == "1x1" and rows[2]["layout"] == "2x1"

    for size, row in rows.items():
        m = json.loads((study_dir / f"size-{size}" / "metrics.json").read_text())
        assert (m["environment"], m["world_size"], m["num_replicas"]) == ("slurm", size, size), m
        assert (m["epochs"], m["steps_per_epoch"], len(m["epoch_samples_per_sec"])) == (3, 10, 3)
        assert (m["per_replica_batch_size"], m["global_batch_size"]) == batches[size], m
        assert m["learning_rate"] == pytest.approx(lrs[size]), m
        # The study reports what the size's own training measured, not a number of its own.
        assert row["samples_per_sec"] == m["samples_per_sec"] > 0
        assert row["input_wait"] == m["input_wait"]
        assert row["time_per_epoch"] == pytest.approx(m["train_samples"] / m["samples_per_sec"])
    # Size 2 ran one task on each node: its step asked for it, and rank 0 (the only rank that
    # reports; srun --label prefixes its lines) says it ran on the first node, so rank 1 had the
    # second. The placement itself is tested in tests/slurm/test_cluster_env.py.
    log2 = (study_dir / "size-2.log").read_text()
    assert "--nodes=2 --ntasks=2 --ntasks-per-node=1 --distribution=block" in log2, log2
    assert re.search(r"^0: .*rank 0 of 2 on tfdist-node1", log2, re.M), log2

    r1, r2 = rows[1]["samples_per_sec"], rows[2]["samples_per_sec"]
    assert rows[1]["efficiency"] == pytest.approx(1.0)
    assert rows[2]["speedup"] == pytest.approx(r2 / r1)
    assert rows[2]["efficiency"] == pytest.approx(r2 / r1 / 2)
    # The table in the job log: a row per size, with that efficiency. (Columns are as wide as
    # their widest cell: "10565 ±10%" widens the samples/s column, CI 2026-11-28.)
    assert re.search(r"^\s*size\s+nodes x tasks\s+global batch\s+scaled LR\s+samples/s\s", job.log,
                     re.M), job.log
    line2 = next(line for line in job.log.splitlines() if re.match(r"^\s+2\s+2x1\s", line))
    assert f"{rows[2]['efficiency']:.0%}" in line2 and f"{r2:.0f}" in line2, line2
    print(f"{scaling}: {r1:.0f} -> {r2:.0f} samples/s, efficiency {rows[2]['efficiency']:.2f}")
