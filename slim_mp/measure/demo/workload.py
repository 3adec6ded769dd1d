"""What the demo trains and times: CifarNet on the bundled Fashion-MNIST subset, its sizes and seed.

CifarNet has no batch norm, so its accuracy means something after the hundred or so steps a slow
laptop CPU fits in the budget (batch norm's moving averages would still sit near their initial values).
"""

MODEL = "cifarnet"
PREPROCESSING = "cifarnet"
DATASET = "fashion_mnist"
NUM_CLASSES = 10
IMAGE_SIZE = 32
# The speed-only timing where bfloat16 is native and the budget allows: 16 times the work per step.
LARGE_IMAGE_SIZE = 128
BATCH_SIZE = 32
EVAL_BATCH_SIZE = 200
SEED = 0
# TensorFlow's and absl's lines go to this file in the output folder, the screen keeps the demo's own.
LOG_FILE_NAME = "tensorflow.log"
