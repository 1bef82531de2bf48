"""MPI launchers: Open MPI's `mpirun`, MPICH's and Intel MPI's `mpiexec` (Hydra), MVAPICH's
`mpirun_rsh`, and HPE's PALS `mpiexec` (PBS Pro on Cray EX systems). Each gives its processes their
rank, the world size and their rank on the node, read here; tfdist needs no MPI library.
The variables are the ones each launcher documents (and, for Open MPI 4.1 and MPICH 4.0, the ones
measured here by printing `env` under each)."""

from __future__ import annotations

from tfdist.cluster.launched import LaunchedEnv


class OpenMPIEnv(LaunchedEnv):
    name = "openmpi"
    launcher = "Open MPI (mpirun)"
    RANK, SIZE = "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"
    LOCAL_RANK, LOCAL_SIZE = "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"
    NUM_NODES = "OMPI_MCA_orte_num_nodes"  # Open MPI 4; 5 says it through PMIx only
    HOST = ("PMIX_HOSTNAME", )
    LAUNCH_ID = ("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE")


class HydraEnv(LaunchedEnv):
    # Hydra, MPICH's process manager, is Intel MPI's too; srun's PMI sets PMI_RANK but never
    # MPI_LOCALRANKID, so Slurm's own variables are read there.
    name = "hydra"
    launcher = "MPICH or Intel MPI (mpiexec, Hydra)"
    RANK, SIZE = "PMI_RANK", "PMI_SIZE"
    LOCAL_RANK, LOCAL_SIZE = "MPI_LOCALRANKID", "MPI_LOCALNRANKS"
    MARKERS = ("MPI_LOCALRANKID", )
    HOST = ("MPIR_CVAR_CH3_INTERFACE_HOSTNAME", )


class MVAPICHEnv(LaunchedEnv):
    name = "mvapich"
    launcher = "MVAPICH (mpirun_rsh)"
    RANK, SIZE = "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"
    LOCAL_RANK, LOCAL_SIZE = "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"


class PALSEnv(LaunchedEnv):
    # PALS sets its own rank variables; the world size is Cray PMI's, set beside them.
    name = "pals"
    launcher = "PALS (HPE Cray mpiexec)"
    RANK, SIZE = "PALS_RANKID", "PMI_SIZE"
    LOCAL_RANK, LOCAL_SIZE = "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"
    LAUNCH_ID = ("PALS_APID", )


ENVIRONMENTS = (OpenMPIEnv, HydraEnv, MVAPICHEnv, PALSEnv)
