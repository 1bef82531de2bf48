"""The real-Slurm fixtures for the field scripts' batch jobs."""

from tests.slurm.conftest import jobdir, slurm  # noqa: F401
