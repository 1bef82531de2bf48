"""Flux (`flux run`, `flux submit`; LLNL, and Flux instances inside Slurm or LSF allocations): the
task variables of flux-environment(7)."""

from __future__ import annotations

from tfdist.cluster.launched import LaunchedEnv


class FluxEnv(LaunchedEnv):
    name = "flux"
    launcher = "Flux (flux run)"
    RANK, SIZE = "FLUX_TASK_RANK", "FLUX_JOB_SIZE"
    LOCAL_RANK = "FLUX_TASK_LOCAL_ID"
    NUM_NODES = "FLUX_JOB_NNODES"
    LAUNCH_ID = ("FLUX_JOB_ID", )
