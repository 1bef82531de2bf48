"""The strategies tfdist builds roles for, by name (read by the roles and the launcher's choice)."""

STRATEGIES = ("auto", "mirrored", "multi_worker", "parameter_server", "horovod", "central_storage",
              "one_device")
# Strategies that run in one task and so need no TF_CONFIG.
SINGLE_TASK = ("mirrored", "central_storage", "one_device")
