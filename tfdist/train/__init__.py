"""Callbacks and the fit driver behind `tfdist train`."""
