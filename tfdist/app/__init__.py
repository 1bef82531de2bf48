"""The `tfdist train` application: its TrainConfig (config), model registry (models), learning-rate
schedules (schedules) and fit driver (fit), built on the rt.callbacks library (tfdist.train), which
never imports it; and the memory model `tfdist plan` prints (memory)."""
