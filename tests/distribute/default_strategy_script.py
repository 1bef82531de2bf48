"""tfdist.distribute.default_strategy in one process with 2 logical CPUs, printing one line per
check (read by test_default_strategy.py)."""

import threading

import tensorflow as tf

from tfdist.distribute import default_strategy

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])


def kind():
    return type(tf.Variable(1.0)).__name__


default_strategy.make_default(strategy)
print("default", kind(), tf.distribute.get_strategy() is strategy)
with strategy.scope():  # entered again: allowed, nothing changes
    print("scope again", kind())
    with default_strategy.outside():
        print("outside in scope", kind(), tf.distribute.has_strategy())
    print("restored in scope", kind())
with default_strategy.outside():
    print("outside", kind(), tf.distribute.has_strategy())
print("restored", kind(), tf.distribute.get_strategy() is strategy)
thread = threading.Thread(target=lambda: print("other thread", kind()))
thread.start()
thread.join()
own = tf.distribute.MirroredStrategy(["/cpu:0"])
with own.scope():  # a strategy of the script's own: tfdist's default steps aside
    print("own", kind(), tf.distribute.get_strategy() is own)
print("after own", kind(), tf.distribute.has_strategy())
default_strategy.make_default(strategy)
default_strategy.clear()
print("cleared", kind(), tf.distribute.has_strategy())
