"""Small training configurations shared by tests that run the training library in-process."""

import dataclasses

from slim_mp.training.learning_rate import LearningRateSettings
from slim_mp.training.optimizers import OptimizerSettings
from slim_mp.training.train_config import TrainConfig


def lenet_config(train_dir: str, **changes) -> TrainConfig:
    """Two SGD steps of LeNet on the bundled data, with ``changes`` applied."""
    config = TrainConfig(
        train_dir=train_dir, dataset_name="fashion_mnist", model_name="lenet", batch_size=16,
        max_number_of_steps=2, num_preprocessing_threads=1, seed=0,
        optimizer_settings=OptimizerSettings(optimizer="sgd"),
        learning_rate_settings=LearningRateSettings(learning_rate_decay_type="fixed", learning_rate=0.01),
    )
    return dataclasses.replace(config, **changes)
