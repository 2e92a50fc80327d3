"""Shared fixtures: a seeded RNG and the awkward sizes every kernel is tested on."""

import numpy as np
import pytest

# Sizes that are not multiples of 4, of a vector width or of a work-group size.
AWKWARD = (1, 3, 5, 17, 130)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240419)
