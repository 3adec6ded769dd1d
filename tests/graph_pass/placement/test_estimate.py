"""The per-op estimate (``estimate``): the cast cost model and the margin the estimate charges."""

import numpy as np

from slim_mp.graph_pass.placement import OpSignature, OpTiming, PlacementOptions
from slim_mp.graph_pass.placement.estimate import fit_cast_model
from slim_mp.graph_pass.placement.signatures import cast_signature


def test_cast_model_fits_the_two_sizes():
    small, large = (cast_signature(n) for n in PlacementOptions().cast_sizes)
    model = fit_cast_model({small: OpTiming(0.0, 0.1), large: OpTiming(0.0, 1.1)}, PlacementOptions().cast_sizes)
    np.testing.assert_allclose(model.ms(PlacementOptions().cast_sizes[0]), 0.1, rtol=1e-9)
    np.testing.assert_allclose(model.ms(PlacementOptions().cast_sizes[1]), 1.1, rtol=1e-9)
    assert OpSignature("Cast", ((10,),)) == cast_signature(10)
