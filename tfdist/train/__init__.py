"""The library behind `rt.callbacks`: checkpoints, exact resume, preemption and requeue, the
throughput meter, metrics.json, the watchdog, the parameter-server evaluator. The `tfdist train`
application built on it is tfdist.app; nothing here imports that."""
