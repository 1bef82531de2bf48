"""TensorFlow's "Parameter server training with ParameterServerStrategy" tutorial (the Model.fit
flow: ClusterCoordinator behind DatasetCreator, tf.keras: tf-keras under
`export TF_USE_LEGACY_KERAS=1`) as users write it for a real cluster, on scikit-learn's digits,
with tfdist's two lines (marked `# tfdist`). Run it with 3 tasks (chief, ps, worker):
`tfdist launch -n 3 -- python examples/tf_parameter_server_tutorial.py OUT`, or on Slurm
`sbatch --ntasks-per-node=2 jobs/parameter_server.sbatch runs/ps -- python
examples/tf_parameter_server_tutorial.py OUT` (chief, 1 ps, 2 workers).

`tfdist.init(strategy="parameter_server")` names its strategy (plain `tfdist.init()` would take
multi_worker under `tfdist launch` without `--strategy`): it builds the TF_CONFIG with the chief,
ps and worker roles that the tutorial's own ParameterServerStrategy reads, and serves the ps and
worker tasks. Arguments: OUT, the BackupAndRestore directory and the result file tfdist's tests
read (examples/results.py). 8 epochs: test accuracy >= 0.95, tfdist's test's bound.
"""
import os
import sys

import tfdist  # tfdist

import tensorflow as tf

import digits_data
import results

# TF_CONFIG with chief, ps and worker from Slurm or `tfdist launch`; the ps and worker tasks serve
# in tfdist.init and exit when the chief has finished (TensorFlow's server.join() never returns).
tfdist.init(strategy="parameter_server")  # tfdist

cluster_resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if cluster_resolver.task_type in ("worker", "ps"):
    # The tutorial's servers: with tfdist.init above, no task gets here.
    server = tf.distribute.Server(cluster_resolver.cluster_spec(),
                                  job_name=cluster_resolver.task_type,
                                  task_index=cluster_resolver.task_id,
                                  protocol=cluster_resolver.rpc_layer or "grpc",
                                  start=True)
    server.join()

variable_partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
    min_shard_bytes=(256 << 10), max_shards=1)
strategy = tf.distribute.ParameterServerStrategy(cluster_resolver,
                                                 variable_partitioner=variable_partitioner)

(x_train, y_train), (x_test, y_test) = digits_data.load_data()


def dataset_fn(input_context):
    global_batch_size = 64
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    dataset = tf.data.Dataset.from_tensor_slices((x_train / 255.0, y_train)).repeat()
    dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    dataset = dataset.shuffle(1400).batch(batch_size).prefetch(2)
    return dataset


dc = tf.keras.utils.experimental.DatasetCreator(dataset_fn)

with strategy.scope():
    model = tf.keras.models.Sequential([
        tf.keras.layers.Flatten(input_shape=(8, 8)),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10)
    ])
    model.compile(tf.keras.optimizers.legacy.Adam(learning_rate=0.002),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"],
                  steps_per_execution=10)

out_dir = sys.argv[1]
callbacks = [tf.keras.callbacks.BackupAndRestore(backup_dir=os.path.join(out_dir, "backup"))]
model.fit(dc, epochs=8, steps_per_epoch=50, callbacks=callbacks, verbose=2)

# Inline evaluation, as in the tutorial: the workers run the evaluation steps.
eval_dataset = tf.data.Dataset.from_tensor_slices((x_test / 255.0, y_test)).batch(len(y_test))
_, accuracy = model.evaluate(eval_dataset, steps=1, verbose=0)
print("Test accuracy:", accuracy)
results.save(out_dir,
             model,
             accuracy,
             workers=len(cluster_resolver.cluster_spec().job_tasks("worker")))
