"""The names callers of an exported model use, defined once below ``slim_mp.export`` so evaluation reads them too.

Every export (frozen graph, SavedModel, TensorFlow Lite model) takes a float32 batch ``input`` and
returns ``logits``, ``probabilities`` and ``classes``; a file named ``*.tflite`` is a TensorFlow
Lite model, written by ``export_inference_graph.py`` and read by ``eval_image_classifier.py``.
"""

INPUT_NAME = "input"
OUTPUT_NAMES = ("logits", "probabilities", "classes")
TFLITE_SUFFIX = ".tflite"


def is_tflite_path(path: str) -> bool:
    """True when ``path`` names a TensorFlow Lite model file (by its ``.tflite`` suffix)."""
    return path.lower().endswith(TFLITE_SUFFIX)
