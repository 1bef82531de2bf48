"""The `tfdist train` application: its TrainConfig (config), model registry (models), learning-rate
schedules (schedules) and fit driver (fit), built on the rt.callbacks library (tfdist.train), which
never imports it; and what `tfdist plan` computes (plan, from the memory model in memory)."""
