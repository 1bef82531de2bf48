"""What the quiet terminal drops (tfdist.logs.NoiseFilter): TensorFlow 2.18's start-up noise as
it really prints it, and nothing else."""

from tfdist.logs import NoiseFilter

# Lines of a healthy 2-task run (TF 2.18, CPU machine), in the order they came.
NOISE = """\
2026-11-23 11:39:50.575743: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:477] Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
E0000 00:00:1795433990.643457    8874 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered
E0000 00:00:1795433990.647038    8874 cuda_blas.cc:1418] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS when one has already been registered
I0000 00:00:1795433997.497374    8872 grpc_server_lib.cc:464] Started server with target: grpc://localhost:25815
I0000 00:00:1795437955.263843   21488 eager_service_impl.cc:356] SessionOptions: device_count {
  key: "CPU"
  value: 1
}
gpu_options {
}
allow_soft_placement: true
experimental {
  collective_group_leader: "/job:worker/replica:0/task:0"
}

""".splitlines()  # noqa: E501
KEPT = [
    "tfdist: epoch 1/10: loss 2.0823 - accuracy 0.3288 - 519 samples/s",
    "Epoch 2/10",
    "W1123 11:40:05.433889 140623642237824 callbacks.py:376] Callback method is slow",
    "2026-11-23 12:26:52.243913: E tensorflow/core/common_runtime/base_collective_executor.cc:248]"
    " BaseCollectiveExecutor::StartAbort UNAVAILABLE",
    "loss: 0.5",  # a user's own line, not right after noise
]


def test_noise_and_its_continuation_lines_go_the_rest_stays():
    noise = NoiseFilter({})
    assert [line for line in NOISE if noise.keep(line)] == []
    assert [line for line in KEPT if noise.keep(line)] == KEPT


def test_verbose_keeps_everything():
    noise = NoiseFilter({"TFDIST_VERBOSE": "1"})
    assert [line for line in NOISE + KEPT if noise.keep(line)] == NOISE + KEPT
