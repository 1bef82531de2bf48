"""Engine defaults and choices, in a module without TensorFlow so the absl flags can share them."""

# multi_worker's all-reduce: auto (NCCL on GPUs, else the ring), TensorFlow's gRPC ring, or NCCL.
COLLECTIVES = ("auto", "ring", "nccl")
# horovod's gradient compression for the all-reduce.
COMPRESSIONS = ("none", "fp16")

# No per-collective timeout by default: TensorFlow keeps one sleeping thread per collective op
# until its timeout expires (600 s gave ~1,600 threads per process after 4 digits epochs, 5,700
# on a long Slurm job). A lost peer still ends the job: MultiWorkerMirroredStrategy's health check
# fails the survivors within seconds (tests/distribute/test_lost_worker.py).
DEFAULT_COLLECTIVE_TIMEOUT = 0.0
# Gradients all-reduced in packs of this many bytes. TensorFlow's 0 packs every gradient into one
# tensor, and one RING collective of it is slow: ResNet-50's 102 MB of gradients between 2 workers
# on loopback took 1.5-3.6x longer than with 16-64 MB packs; 16 MB was the fastest setting in 3
# of 4 sweeps (0, 4-128 MB) and within 14 % of the best in the fourth (bench/allreduce.py).
DEFAULT_BYTES_PER_PACK = 16 * 2**20
