"""The fit driver of `tfdist train`: a named model on a named pipeline under any engine."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from typing import Any, Optional

import tfdist
from tfdist.distribute import LostTaskError
from tfdist.runtime import Runtime

log = logging.getLogger("tfdist")

OPTIMIZERS = ("sgd", "adam")


@dataclasses.dataclass
class TrainConfig:
    model: str = "cnn"
    pipeline: str = "digits"
    strategy: str = "auto"
    num_ps: int = 1
    port: Optional[int] = None
    epochs: int = 10
    batch_size: int = 32  # per replica
    lr: float = 0.05  # single-replica rate, scaled by lr_scaling
    lr_scaling: str = "linear"
    optimizer: str = "sgd"
    model_dir: Optional[str] = None
    seed: int = 0
    shuffle: bool = True
    steps_per_epoch: int = 0  # 0: one pass over the training split
    data_dir: Optional[str] = None
    verbose: Optional[int] = None  # None: progress bar on a terminal, one line per epoch otherwise
    engine_options: dict[str, Any] = dataclasses.field(default_factory=dict)


def make_optimizer(name: str, lr: float):
    import tensorflow as tf

    if name == "sgd":
        return tf.keras.optimizers.SGD(lr, momentum=0.9)
    if name == "adam":
        return tf.keras.optimizers.Adam(lr)
    raise ValueError(f"Unknown optimizer {name!r}: expected one of {', '.join(OPTIMIZERS)}.")


def train(cfg: TrainConfig) -> Optional[dict[str, Any]]:
    """Train, evaluate on the test split, and (chief) write MODEL_DIR/metrics.json and the model.

    Returns the metrics on every training task; tasks that only serve exit inside tfdist.init.
    """
    rt = tfdist.init(strategy=cfg.strategy,
                     num_ps=cfg.num_ps,
                     port=cfg.port,
                     lr_scaling=cfg.lr_scaling,
                     **cfg.engine_options)
    try:
        return _train(rt, cfg)
    except Exception as e:
        message = rt.engine.explain_failure(e)
        if message:
            raise LostTaskError(message) from e
        raise
    finally:
        rt.shutdown()


def _train(rt: Runtime, cfg: TrainConfig) -> dict[str, Any]:
    import tensorflow as tf

    from tfdist.data import load_pipeline
    from tfdist.train.models import build_model
    from tfdist.train.throughput import ThroughputMeter

    tf.keras.utils.set_random_seed(cfg.seed)
    pipeline = load_pipeline(cfg.pipeline)
    info = pipeline.info(cfg.data_dir)
    global_batch = rt.global_batch_size(cfg.batch_size)
    steps = cfg.steps_per_epoch or info["num_train"] // global_batch
    if steps < 1:
        raise ValueError(f"--batch_size={cfg.batch_size} x {rt.num_replicas} replicas = "
                         f"{global_batch} is more than the {info['num_train']} training samples "
                         f"of {cfg.pipeline!r}; lower --batch_size.")

    def train_input(input_context):
        return pipeline.dataset("train",
                                input_context,
                                cfg.batch_size,
                                seed=cfg.seed,
                                shuffle=cfg.shuffle,
                                repeat=True,
                                data_dir=cfg.data_dir)

    def compiled(model, optimizer):
        model.compile(optimizer=optimizer,
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        return model

    with rt.scope():
        model = build_model(cfg.model, info["input_shape"], info["num_classes"])
        optimizer = rt.optimizer(make_optimizer(cfg.optimizer, rt.scale_lr(cfg.lr)))
        compiled(model, optimizer)

    meter = ThroughputMeter(global_batch, steps)
    verbose = cfg.verbose if cfg.verbose is not None else (1 if sys.stdout.isatty() else 2)
    history = model.fit(rt.dataset(train_input),
                        epochs=cfg.epochs,
                        steps_per_epoch=steps,
                        callbacks=rt.callbacks() + [meter],
                        verbose=verbose if rt.is_chief else 0)

    # The test split is evaluated by a plain copy of the model, outside the strategy: the same on
    # every engine, and no collective that a task could miss.
    local = compiled(build_model(cfg.model, info["input_shape"], info["num_classes"]), "sgd")
    local.set_weights(model.get_weights())
    test = pipeline.dataset("test",
                            tf.distribute.InputContext(),
                            256,
                            shuffle=False,
                            drop_remainder=False,
                            data_dir=cfg.data_dir)
    test_loss, test_accuracy = local.evaluate(test, verbose=0)

    metrics = {
        "strategy": rt.strategy_name,
        "environment": rt.cluster.environment,
        "num_replicas": rt.num_replicas,
        "world_size": rt.world_size,
        "rank": rt.rank,
        "global_batch_size": global_batch,
        "per_replica_batch_size": cfg.batch_size,
        "learning_rate": rt.scale_lr(cfg.lr),
        "epochs": cfg.epochs,
        "steps_per_epoch": steps,
        "model": cfg.model,
        "pipeline": cfg.pipeline,
        "samples_per_sec": meter.steady_samples_per_sec,
        "epoch_samples_per_sec": meter.epoch_rates,
        "final": {
            "loss": float(history.history["loss"][-1]),
            "accuracy": float(history.history["accuracy"][-1]),
            "test_loss": float(test_loss),
            "test_accuracy": float(test_accuracy),
        },
    }
    if rt.is_chief:
        log.info("test accuracy %.4f, %.0f samples/s", test_accuracy, metrics["samples_per_sec"])
        if cfg.model_dir:
            _write_results(cfg.model_dir, local, metrics)
    return metrics


def _write_results(model_dir: str, model, metrics: dict[str, Any]) -> None:
    from tfdist.train.atomic import write_json

    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, "model.keras")
    tmp = os.path.join(model_dir, ".tmp-model.keras")
    model.save(tmp)
    os.replace(tmp, path)
    write_json(os.path.join(model_dir, "metrics.json"), metrics)
