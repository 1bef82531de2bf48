"""Where am I? The cluster layer: environments, roles, ports. Never imports TensorFlow."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Optional

from tfdist.cluster import gpus
from tfdist.cluster.base import Cluster, ClusterEnv
from tfdist.cluster.errors import ClusterError
from tfdist.cluster.flux import FluxEnv
from tfdist.cluster.horovodrun import with_horovodrun
from tfdist.cluster.launcher_choice import read_choice
from tfdist.cluster.local import LocalLaunchEnv, single_process
from tfdist.cluster.lsf import JsrunEnv
from tfdist.cluster.mpi import HydraEnv, MVAPICHEnv, OpenMPIEnv, PALSEnv
from tfdist.cluster.other_launchers import other_launcher
from tfdist.cluster.ports import check_port_free
from tfdist.cluster.roles import STRATEGIES, Roles, build_roles
from tfdist.cluster.slurm import SlurmEnv
from tfdist.cluster.tf_config import TFConfigEnv

# Detection order, innermost launcher first: `tfdist launch`'s variables beat a TF_CONFIG the user
# set; MPI launchers beat the task launchers of schedulers (mpirun inside a Slurm, Flux or LSF job
# starts its ranks through them, and they pass their own variables on); Slurm comes last.
ENVIRONMENTS: tuple[type[ClusterEnv], ...] = (LocalLaunchEnv, TFConfigEnv, OpenMPIEnv, PALSEnv,
                                              HydraEnv, MVAPICHEnv, FluxEnv, JsrunEnv, SlurmEnv)


def detect(environ: Optional[Mapping[str, str]] = None) -> Cluster:
    """This task's Cluster from the first environment present, else a single local process (which
    names the launcher that started it as one of several, when one tfdist does not read did); with
    horovodrun's ranks where horovodrun started it (tfdist.cluster.horovodrun), and the strategy its
    launcher chose (TFDIST_STRATEGY, in every environment)."""
    environ = os.environ if environ is None else environ
    for env in ENVIRONMENTS:
        if env.is_present(environ):
            cluster = env.read(environ)
            break
    else:
        cluster = single_process(other_launcher(environ))
    return dataclasses.replace(with_horovodrun(cluster, environ), **read_choice(environ))


__all__ = [
    "Cluster", "ClusterEnv", "ClusterError", "ENVIRONMENTS", "Roles", "STRATEGIES", "build_roles",
    "check_port_free", "detect", "gpus"
]
