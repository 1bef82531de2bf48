"""Scaling studies: the same training at several sizes, compared (no TensorFlow: every size runs in
processes of its own, started with `srun` or `tfdist launch`)."""
