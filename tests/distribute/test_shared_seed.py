"""tfdist.distribute.shared_seed's decision, from every task's own seed (parsing only: the
collective itself runs in tests/distribute/test_samples_read.py, on real processes)."""

import pytest

from tfdist.distribute.shared_seed import choose, decode, encode


@pytest.mark.parametrize("seed", [None, 0, 1, 1234, 65535, 65536, 2**63 - 1, -1, -2**63])
def test_a_seed_travels_exactly_as_float32(seed):
    import numpy as np

    row = [float(v) for v in np.array(encode(seed, 99), np.float32)]  # what the gather carries
    assert decode(row) == seed and row[-1] == 99


def test_no_seed_anywhere_is_the_chiefs_draw():
    assert choose([None, None, None], 7) == (7, False)


@pytest.mark.parametrize("seeds", [[5, None], [None, 5], [5, 5], [None, 5, 5]])
def test_the_seed_the_seeded_agree_on_goes_to_the_others(seeds):
    assert choose(seeds, 7) == (5, False)


@pytest.mark.parametrize("seeds,expected", [([1, 2], 1), ([None, 1, 2], 7), ([2, None, 1], 2)])
def test_different_seeds_are_said_and_the_unseeded_take_the_chiefs(seeds, expected):
    assert choose(seeds, 7) == (expected, True)
