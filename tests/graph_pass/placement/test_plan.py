"""The decision as the rest of slim_mp sees it (``plan``): an emulated precision is painted statically,
and the report says why; the plan's JSON marks the chosen candidate.
"""

import pytest
import tensorflow as tf

from slim_mp.graph_pass.placement import PlacementOptions
from slim_mp.graph_pass.rewrite import rewrite

from .fakes import refuse, refuse_steps, conv_chain, op_dtype


def test_float16_on_a_cpu_is_painted_statically_and_the_report_says_why(tmp_path):
    # float16 is emulated on CPUs: timing would keep everything float32 and hide float16's numerics.
    graph, loss = conv_chain()
    with graph.as_default():
        with pytest.warns(UserWarning, match="float16 kernels on CPU are emulated"):
            report = rewrite(loss, "float16", device_type="CPU", placement="measured",
                             placement_options=PlacementOptions(cache_dir=str(tmp_path), measure=refuse,
                                                                measure_steps=refuse_steps))
    assert op_dtype(graph, "conv0_fp16") == tf.float16
    assert report.placement.timed is False and report.placement.float32_ops == {}
    assert "static painting, not timed: float16 kernels on CPU are emulated" in report.summary()
