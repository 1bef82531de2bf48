"""tfdist.init() on a CPU machine whose TensorFlow is made to list N stand-in GPUs; prints what
TensorFlow was told when it created its devices.

The stand-ins are PhysicalDevice entries added to TensorFlow's own list, so the real
tf.config.set_visible_devices / set_memory_growth accept them (and refuse changes once the
devices exist). At the first context initialisation the GPU options that TensorFlow passes to
its runtime are recorded: the visible_device_list and allow_growth there are what a real GPU
machine's runtime would receive. No GPU computes anything here.

argv: STRATEGY GPUS [late] [nogrowth]; prints "GPU_PIN {json}".
"""

import json
import sys

import tfdist
import tensorflow as tf
from tensorflow.python.eager import context

told = {}


def stand_in_gpus(n):
    ctx = context.context()
    ctx._initialize_physical_devices()
    fake = [
        context.PhysicalDevice(name=f"/physical_device:GPU:{i}", device_type="GPU")
        for i in range(n)
    ]
    ctx._physical_devices += fake
    ctx._physical_device_to_index = {p: i for i, p in enumerate(ctx._physical_devices)}
    ctx._visible_device_list += fake
    ctx._memory_growth_map.update({d: None for d in fake})


def record_device_creation():
    create = context.Context.ensure_initialized

    def ensure_initialized(self):
        if not self._initialized and not told:
            options = self.config.gpu_options
            told.update(visible_device_list=options.visible_device_list,
                        allow_growth=options.allow_growth)
        return create(self)

    context.Context.ensure_initialized = ensure_initialized


def communication(strategy):
    """The CommunicationImplementation a MultiWorkerMirroredStrategy was made with (None for
    another strategy)."""
    options = getattr(strategy.extended, "_communication_options", None)
    return None if options is None else options.implementation.name


def main(strategy, gpus, *modes):
    stand_in_gpus(int(gpus))
    record_device_creation()
    if "late" in modes:
        tf.constant(1.0)  # TensorFlow creates its devices here, before tfdist.init
    try:
        rt = tfdist.init(strategy=strategy, gpu_memory_growth="nogrowth" not in modes)
    except Exception as e:
        print("GPU_PIN " + json.dumps({"error": f"{type(e).__name__}: {e}", "told": told}))
        return
    rt.barrier()  # a collective: every engine has created its devices by now
    print(
        "GPU_PIN " + json.dumps({
            "rank": rt.rank,
            "told": told,
            "plan": rt.gpus.as_dict(),
            "collective": getattr(rt.engine, "collective", None),
            # What the strategy all-reduces with: the options TensorFlow's strategy was built with.
            "implementation": communication(rt.strategy),
        }),
        flush=True)
    rt.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
