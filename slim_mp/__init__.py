"""slim_mp: mixed-precision (float16 / bfloat16) training for TF-Slim graphs.

Importing the package makes tf_slim 1.1.0 work under TensorFlow 2.21
(see ``slim_mp.compat``).
"""

from slim_mp import compat as _compat

_compat.install()

__version__ = "0.1.0"
