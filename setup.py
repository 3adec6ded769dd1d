"""Install slim_mp: mixed-precision training for TF-Slim.

TensorFlow itself is an extra, because the CPU and GPU wheels are different
distributions that must not be installed side by side:

* CPU:  ``pip install -e .[cpu]`` then ``pip install --no-deps tf-keras==2.21.0``
  (tf-keras declares a dependency on the ``tensorflow`` wheel; ``--no-deps``
  keeps pip from pulling that ~600 MB GPU-capable wheel next to
  ``tensorflow-cpu``). ``make install`` does both.
* GPU:  ``pip install -e .[gpu]`` installs ``tensorflow[and-cuda]`` and
  ``tf-keras`` together, a consistent set.

The ``tflite`` extra installs LiteRT (``ai-edge-litert``), the interpreter that evaluates
TensorFlow Lite models (``eval_image_classifier.py --checkpoint_path=model.tflite``): TensorFlow
2.21's own ``tf.lite.Interpreter`` is deprecated in its favour. It brings no second TensorFlow and
shares TensorFlow's numpy and protobuf; the converter that writes the models is TensorFlow's.
"""

from setuptools import find_packages, setup

TF_VERSION = "2.21.0"

setup(
    name="slim_mp",
    version="0.1.0",
    description="Mixed-precision (float16/bfloat16) training for TF-Slim graphs",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["slim_mp", "slim_mp.*", "nets", "nets.*"]),
    package_data={"slim_mp": ["datasets/data/*.npz", "datasets/data/*.txt", "datasets/data/*.md"]},
    install_requires=[
        "tf-slim==1.1.0",
        "absl-py>=2.1",
        "numpy>=1.26",
    ],
    extras_require={
        "cpu": [f"tensorflow-cpu=={TF_VERSION}"],
        "gpu": [f"tensorflow[and-cuda]=={TF_VERSION}", f"tf-keras=={TF_VERSION}"],
        "test": ["pytest>=8", "pytest-xdist>=3.5", "ruff>=0.15"],
        "plots": ["matplotlib>=3.8"],
        "tflite": ["ai-edge-litert==2.3.0"],
    },
)
