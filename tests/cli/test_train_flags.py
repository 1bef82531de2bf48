"""Every `tfdist train` flag reaches the TrainConfig the fit driver gets."""

import dataclasses

import pytest
from absl import flags
from absl import logging as absl_logging

from tfdist.cli import flags as tfdist_flags
from tfdist.cli import train as train_cli
from tfdist.app.config import TrainConfig
from tfdist.cluster import STRATEGIES
from tfdist.distribute import option_names


def test_flags_reach_the_train_config():
    argv = [
        "tfdist train", "--model=mlp", "--pipeline=synthetic", "--strategy=multi_worker",
        "--epochs=3", "--batch_size=16", "--lr=0.2", "--lr_scaling=sqrt", "--warmup_epochs=1.5",
        "--lr_schedule=cosine", "--lr_decay_epochs=2", "--lr_decay_rate=0.5", "--optimizer=adam",
        "--mixed_precision=mixed_bfloat16", "--model_dir=/tmp/x", "--checkpoint_steps=7",
        "--requeue", "--notensorboard", "--nometer", "--nopreemption", "--seed=9", "--noshuffle",
        "--steps_per_epoch=11", "--steps_per_execution=4", "--data_dir=/tmp/d", "--port=25000",
        "--bytes_per_pack=1024", "--collective=nccl", "--task_gpus=share", "--nogpu_memory_growth",
        "--restart", "--pipeline_option=shape=8,8,1", "--pipeline_option=num_train=64"
    ]
    verbosity = absl_logging.get_verbosity()  # parsing --verbosity changes absl's logger level
    flags.FLAGS.unparse_flags()
    flags.FLAGS(argv)
    try:
        cfg = train_cli.config_from_flags()
    finally:
        flags.FLAGS.unparse_flags()
        absl_logging.set_verbosity(verbosity)
    assert cfg == TrainConfig(model="mlp",
                              pipeline="synthetic",
                              strategy="multi_worker",
                              num_ps=1,
                              port=25000,
                              epochs=3,
                              batch_size=16,
                              lr=0.2,
                              lr_scaling="sqrt",
                              warmup_epochs=1.5,
                              lr_schedule="cosine",
                              lr_decay_epochs=2.0,
                              lr_decay_rate=0.5,
                              optimizer="adam",
                              mixed_precision="mixed_bfloat16",
                              model_dir="/tmp/x",
                              checkpoint_steps=7,
                              requeue=True,
                              restart=True,
                              tensorboard=False,
                              meter=False,
                              preemption=False,
                              seed=9,
                              shuffle=False,
                              steps_per_epoch=11,
                              steps_per_execution=4,
                              data_dir="/tmp/d",
                              pipeline_options={
                                  "shape": "8,8,1",
                                  "num_train": "64"
                              },
                              task_gpus="share",
                              gpu_memory_growth=False,
                              engine_options={
                                  "collective": "nccl",
                                  "bytes_per_pack": 1024,
                                  "collective_timeout": flags.FLAGS["collective_timeout"].default
                              })
    # Every field but these three is a flag of the same name (pipeline_options: the repeated
    # --pipeline_option).
    names = {f.name
             for f in dataclasses.fields(TrainConfig)
             } - {"engine_options", "verbose", "pipeline_options"}
    assert names | {"pipeline_option"} <= set(flags.FLAGS)


def test_keras3_refuses_horovods_backward_passes_at_parse_time():
    """Horovod's accumulation lives in Keras 2 optimizer hooks (docs/horovod.md)."""
    flags.FLAGS.unparse_flags()
    try:
        with pytest.raises(flags.IllegalFlagValueError,
                           match=r"--backward_passes_per_step > 1 with --keras=3.*"
                           r"gradient_accumulation_steps=N"):
            flags.FLAGS(
                ["tfdist train", "--strategy=horovod", "--keras=3", "--backward_passes_per_step=2"])
    finally:
        flags.FLAGS.unparse_flags()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_flags_give_each_strategy_options_of_its_own_engine(strategy):
    """tfdist train passes engine_options_from_flags() to tfdist.init, which refuses an option
    that is not the strategy's engine's."""
    verbosity = absl_logging.get_verbosity()
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["tfdist train", f"--strategy={strategy}"])
    try:
        given = tfdist_flags.engine_options_from_flags()
    finally:
        flags.FLAGS.unparse_flags()
        absl_logging.set_verbosity(verbosity)
    assert set(given) <= set(option_names(strategy))
