"""Print the ``TF_ENABLE_ONEDNN_OPTS`` value that flips what TensorFlow does here: ``0`` if oneDNN is on, else ``1``.

TensorFlow turns oneDNN on by default on AVX512-class x86 CPUs (AVX512-VNNI, AVX512-BF16, AMX) and
off elsewhere, and the environment variable overrides either way. ``make test`` runs the tests
marked ``executed_ops`` a second time with this value, so both kinds of kernels are tested on
every machine.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tensorflow.python.util import _pywrap_util_port  # noqa: E402

if __name__ == "__main__":
    print("0" if _pywrap_util_port.IsMklEnabled() else "1")
