"""LSF with IBM's `jsrun` (Job Step Manager; Summit-class systems): its JSM_NAMESPACE variables.
jsrun is PMIx-based, so PMIX_NAMESPACE names the launch; LSB_JOBID (the batch job) otherwise."""

from __future__ import annotations

from tfdist.cluster.launched import LaunchedEnv


class JsrunEnv(LaunchedEnv):
    name = "lsf"
    launcher = "LSF (jsrun)"
    RANK, SIZE = "JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE"
    LOCAL_RANK, LOCAL_SIZE = "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_SIZE"
    LAUNCH_ID = ("PMIX_NAMESPACE", )
