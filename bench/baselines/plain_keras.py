"""One process, no distribution: the plain Keras script every tutorial starts from.

  python bench/baselines/plain_keras.py --model=cnn --epochs=4 --steps_per_epoch=50
"""

import tensorflow as tf

from digits_models import build_model, compile_model, keras, load_data, parse_args

args = parse_args()
keras.utils.set_random_seed(0)
(x_train, y_train), (x_test, y_test) = load_data()
train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).cache()
train = train.shuffle(len(x_train), seed=0).repeat().batch(args.batch_size, drop_remainder=True)
train = train.prefetch(tf.data.AUTOTUNE)

model = compile_model(build_model(args.model), keras.optimizers.SGD(args.lr, momentum=0.9))
model.fit(train, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, verbose=2)
loss, accuracy = model.evaluate(x_test, y_test, batch_size=256, verbose=0)
print(f"test accuracy {accuracy:.4f}")
