"""The rate's course in time (--warmup_epochs, --lr_schedule): refused alike by train and plan when
the step schedule has no interval, and said by plan under its learning-rate table."""

import pytest

from tfdist.app.config import TrainConfig
from tfdist.app.plan import PlanOptions, lr_course
from tfdist.cli.plan import course_text
from tfdist.errors import ConfigError

REFUSED = ("lr_schedule='step' with lr_decay_epochs=0: the step schedule multiplies the rate by "
           "--lr_decay_rate every --lr_decay_epochs epochs; set --lr_decay_epochs > 0 (e.g. 30).")


def test_a_step_schedule_without_its_interval_is_refused_before_anything_is_built():
    with pytest.raises(ConfigError) as refused:
        TrainConfig(lr_schedule="step")
    assert str(refused.value) == REFUSED
    assert TrainConfig(lr_schedule="step", lr_decay_epochs=30).lr_decay_epochs == 30


def text(**course) -> str:
    options = PlanOptions(model="mlp",
                          optimizer="sgd",
                          lr=0.05,
                          mixed_precision="float32",
                          batch_size=32,
                          **course)
    return course_text({"lr": 0.05, "lr_scaling": "linear", "lr_course": lr_course(options)})


def test_plan_says_how_train_gets_to_its_column_and_what_follows():
    assert text() == ""  # the table's rate from the first step to the last: nothing to add
    assert text(warmup_epochs=5, lr_schedule="cosine") == (
        "  tfdist train ramps the rate linearly from --lr=0.05 to the `train: linear` column's "
        "rate over the first 5 epochs (--warmup_epochs), then decays it along a cosine to 0 at "
        "the last epoch (--epochs) (--lr_schedule=cosine).")
    assert text(lr_schedule="step", lr_decay_epochs=10, lr_decay_rate=0.5) == (
        "  tfdist train starts at the `train: linear` column's rate and multiplies it by 0.5 "
        "every 10 epochs (--lr_decay_rate, --lr_decay_epochs) (--lr_schedule=step).")
    assert text(warmup_epochs=2.5).endswith("over the first 2.5 epochs (--warmup_epochs), then "
                                            "keeps it (--lr_schedule=constant).")
