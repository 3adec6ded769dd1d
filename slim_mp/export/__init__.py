"""From a trained checkpoint to a servable model: inference graphs, frozen weights, SavedModels (issue 16).

In the order an export runs: ``inference_graph`` (the official script's inference graph, rewritten
for low precision, its weights frozen), ``low_precision_weights`` (frozen weights stored in the
precision the graph computes in), ``saved_model`` (the frozen graph as a SavedModel with one
``serving_default`` signature), ``tflite_model`` (the frozen float32 graph as a TensorFlow Lite model:
float32, float16 weights or int8, by TensorFlow's converter), and ``exporter`` (``export_model``, all
of it as one function); ``tflite_comparison`` sets a checkpoint's three TensorFlow Lite models beside
its frozen float32 graph (bytes, top-1, agreement: ``scripts/tflite_report.py``).
"""
