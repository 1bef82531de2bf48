"""Launchers that start several processes but whose roles tfdist cannot read: a PMI-only launcher
(a process manager that sets PMI_RANK and PMI_SIZE and nothing that says where the others run).
A process they started otherwise looks like a single local process: N processes would each train
the whole run alone, into one model directory.

Read only where no environment tfdist knows (tfdist.cluster.ENVIRONMENTS) is present; the cluster
layer then refuses every strategy (tfdist.cluster.roles.build_roles).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

# (launcher, its size variable, its rank variable), in the order they are tried.
LAUNCHERS = (("a PMI process manager (not Hydra, PALS or Slurm's srun, which tfdist reads)",
              "PMI_SIZE", "PMI_RANK"), )


def other_launcher(environ: Mapping[str, str]) -> Optional[str]:
    """How a launcher tfdist does not read started this process as one of several, e.g.
    "a PMI process manager ...: PMI_RANK=1 of PMI_SIZE=2"; None when none did."""
    for name, size_var, rank_var in LAUNCHERS:
        size = environ.get(size_var, "")
        if size.isdigit() and int(size) > 1:
            rank = environ.get(rank_var, "?")
            return f"{name}: {rank_var}={rank} of {size_var}={size}"
    return None
