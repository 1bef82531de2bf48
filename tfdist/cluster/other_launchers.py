"""Launchers that start several processes but whose roles tfdist does not read yet (MPI's
`mpirun`/`mpiexec`, Flux, LSF's `jsrun`). A process they started otherwise looks like a single
local process: N processes would each train the whole run alone, into one model directory.

Read only where no environment tfdist knows (tfdist launch, TF_CONFIG, Slurm) is present. The
cluster layer then refuses every strategy except `horovod`, which Horovod sets up itself from Open
MPI's variables (tfdist.distribute.horovod_setup.horovodrun_environment).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

# (launcher, its size variable, its rank variable), in the order they are tried.
LAUNCHERS = (
    ("Open MPI (mpirun)", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
    ("MVAPICH (mpirun_rsh, mpiexec)", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"),
    ("an MPI launcher (PMI: MPICH's or Intel MPI's mpiexec, PBS's, Cray's)", "PMI_SIZE",
     "PMI_RANK"),
    ("Flux (flux run)", "FLUX_JOB_SIZE", "FLUX_TASK_RANK"),
    ("LSF (jsrun)", "JSM_NAMESPACE_SIZE", "JSM_NAMESPACE_RANK"),
)
# The launcher under which --strategy=horovod works: Horovod reads its variables itself.
HOROVOD_READS = "OMPI_COMM_WORLD_SIZE"


def other_launcher(environ: Mapping[str, str]) -> Optional[str]:
    """How a launcher tfdist does not read started this process as one of several, e.g.
    "Open MPI (mpirun): OMPI_COMM_WORLD_RANK=1 of OMPI_COMM_WORLD_SIZE=2"; None when none did."""
    for name, size_var, rank_var in LAUNCHERS:
        size = environ.get(size_var, "")
        if size.isdigit() and int(size) > 1:
            rank = environ.get(rank_var, "?")
            return f"{name}: {rank_var}={rank} of {size_var}={size}"
    return None
