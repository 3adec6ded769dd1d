"""``--is_video_model`` / ``--num_frames``: the official 5-D input of i3d and s3dg, and the flags checked first."""

import numpy as np
import pytest
import tensorflow as tf

from slim_mp.export.exporter import export_model
from slim_mp.export.inference_graph import ExportConfig, build_inference_graph

tf1 = tf.compat.v1


@pytest.mark.parametrize("overrides, expected", [
    ({"model_name": "i3d", "is_video_model": True}, "--is_video_model needs the clip length: pass --num_frames"),
    ({"model_name": "i3d"}, "--model_name=i3d reads video clips; pass --is_video_model and --num_frames"),
    ({"model_name": "lenet", "is_video_model": True, "num_frames": 4}, "--is_video_model: --model_name=lenet reads"),
    ({"model_name": "s3dg", "is_video_model": True, "num_frames": 0}, "--is_video_model needs the clip length"),
    ({"model_name": "s3dg", "is_video_model": True, "num_frames": -2}, "--num_frames=-2 must be a positive"),
])
def test_video_flags_that_do_not_fit_the_network_are_refused_before_any_work(overrides, expected, tmp_path):
    output = tmp_path / "graph.pb"
    config = ExportConfig(**{"dataset_name": "fashion_mnist", "output_file": str(output), **overrides})
    with pytest.raises(ValueError) as raised:
        export_model(config, print_line=lambda line: None)
    assert expected in str(raised.value)
    assert not output.exists()


@pytest.mark.slow
def test_i3d_exports_a_five_dimensional_clip_input_that_runs():
    built = build_inference_graph(ExportConfig(model_name="i3d", dataset_name="fashion_mnist", is_video_model=True,
                                               num_frames=8, image_size=64))
    assert built.images.shape.as_list() == [None, 8, 64, 64, 3]  # [batch, num_frames, size, size, channels]
    clip = np.random.default_rng(0).uniform(-1, 1, [2, 8, 64, 64, 3]).astype(np.float32)
    with built.graph.as_default(), tf1.Session() as session:
        session.run(tf1.global_variables_initializer())
        probabilities = session.run(built.outputs["probabilities"], {built.images: clip})
    assert probabilities.shape == (2, 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
