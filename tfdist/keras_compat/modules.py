"""The Keras modules whose private code tfdist corrects, copies or reads: each name written once.

Keras 3's modules are corrected when they are imported (tfdist.keras_compat.apply) and their
functions gated by source (tfdist.keras_compat.known_sources); tf-keras's are read by its adapter
(tfdist.keras_compat.tf_keras_adapter). Plain strings: importing this imports no Keras.
"""

TRAINER = "keras.src.backend.tensorflow.trainer"  # Keras 3's TensorFlow fit/evaluate/predict
MODEL = "keras.src.models.model"  # Keras 3's Model: save and save_weights
LOSS_SCALE = "keras.src.optimizers.loss_scale_optimizer"  # mixed_float16's LossScaleOptimizer
ADAPTERS = "keras.src.trainers.data_adapters"  # which inputs fit, evaluate and predict take
EPOCH_ITERATOR = "keras.src.trainers.epoch_iterator"  # the calls of an epoch and their steps
CSV_LOGGER = "keras.src.callbacks.csv_logger"  # the CSVLogger callback
METRIC = "keras.src.metrics.metric"  # Keras 3's Metric: the variables of its state
TF_KERAS_TRAINING = "tf_keras.src.engine.training"  # tf-keras's Model: fit and its train function
