"""ParameterServerStrategy by hand, the way TensorFlow's parameter-server tutorial does it (the
Model.fit flow): every process builds TF_CONFIG from its rank (0: chief, 1: ps, the rest
workers); the ps and workers run a server, the chief drives model.fit with a DatasetCreator.

  RANK=r WORLD_SIZE=4 BASE_PORT=23456 python bench/baselines/parameter_server_keras.py
  (the servers never return: whoever started them stops them when the chief has finished)
"""

import json
import os

rank = int(os.environ["RANK"])
world_size = int(os.environ["WORLD_SIZE"])
base_port = int(os.environ.get("BASE_PORT", "23456"))
hosts = [f"localhost:{base_port + i}" for i in range(world_size)]
cluster = {"chief": hosts[:1], "ps": hosts[1:2], "worker": hosts[2:]}
task = ("chief", 0) if rank == 0 else ("ps", 0) if rank == 1 else ("worker", rank - 2)
os.environ["TF_CONFIG"] = json.dumps({
    "cluster": cluster,
    "task": {
        "type": task[0],
        "index": task[1]
    }
})

import tensorflow as tf  # noqa: E402

from digits_models import TF_KERAS, build_model, compile_model, keras, load_data  # noqa: E402
from digits_models import make_optimizer, parse_args  # noqa: E402

args = parse_args()
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if resolver.task_type in ("ps", "worker"):
    server = tf.distribute.Server(resolver.cluster_spec(),
                                  job_name=resolver.task_type,
                                  task_index=resolver.task_id,
                                  protocol="grpc",
                                  start=True)
    server.join()

strategy = tf.distribute.ParameterServerStrategy(resolver)
workers = len(cluster["worker"])
keras.utils.set_random_seed(0)
(x_train, y_train), (x_test, y_test) = load_data()


def dataset_fn(input_context):
    batch = input_context.get_per_replica_batch_size(args.batch_size *
                                                     input_context.num_replicas_in_sync)
    data = tf.data.Dataset.from_tensor_slices((x_train, y_train)).cache()
    data = data.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    data = data.shuffle(len(x_train), seed=0).repeat().batch(batch, drop_remainder=True)
    return data.prefetch(tf.data.AUTOTUNE)


with strategy.scope():
    model = compile_model(build_model(args.model), make_optimizer(args.optimizer,
                                                                  args.lr * workers))
# tf-keras: the tutorial's DatasetCreator. Keras 3 has none, nor a coordinator-driven fit of its
# own (keras-team/keras#18624): its users can only pass the dataset.
data = (keras.utils.experimental.DatasetCreator(dataset_fn)
        if TF_KERAS else dataset_fn(tf.distribute.InputContext()))
model.fit(data, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, verbose=2)
_, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
print(f"test accuracy {accuracy:.4f}")
