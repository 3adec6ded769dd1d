"""The optimizers of TF-Slim's training script, built from its flag-named knobs."""

import dataclasses
from typing import Callable, Dict, Union

import tensorflow as tf

from slim_mp.config_fields import option

tf1 = tf.compat.v1

LearningRate = Union[float, tf.Tensor]


@dataclasses.dataclass(frozen=True)
class OptimizerSettings:
    """Every optimizer knob, named and defaulted as the flags of ``train_image_classifier.py``."""

    optimizer: str = option("rmsprop", "The optimizer: adadelta, adagrad, adam, ftrl, momentum, sgd or rmsprop.")
    adadelta_rho: float = option(0.95, "The decay rate of adadelta.")
    adagrad_initial_accumulator_value: float = option(0.1, "Starting value of the AdaGrad accumulators.")
    adam_beta1: float = option(0.9, "The exponential decay rate of the 1st moment estimates.")
    adam_beta2: float = option(0.999, "The exponential decay rate of the 2nd moment estimates.")
    opt_epsilon: float = option(1.0, "Epsilon term of the optimizer.")
    ftrl_learning_rate_power: float = option(-0.5, "The learning rate power of FTRL.")
    ftrl_initial_accumulator_value: float = option(0.1, "Starting value of the FTRL accumulators.")
    ftrl_l1: float = option(0.0, "The FTRL l1 regularization strength.")
    ftrl_l2: float = option(0.0, "The FTRL l2 regularization strength.")
    momentum: float = option(0.9, "The momentum of the MomentumOptimizer.")
    rmsprop_momentum: float = option(0.9, "Momentum of RMSProp.")
    rmsprop_decay: float = option(0.9, "Decay term of RMSProp.")


_BUILDERS: Dict[str, Callable[[LearningRate, OptimizerSettings], tf1.train.Optimizer]] = {
    "adadelta": lambda lr, s: tf1.train.AdadeltaOptimizer(lr, rho=s.adadelta_rho, epsilon=s.opt_epsilon),
    "adagrad": lambda lr, s: tf1.train.AdagradOptimizer(
        lr, initial_accumulator_value=s.adagrad_initial_accumulator_value
    ),
    "adam": lambda lr, s: tf1.train.AdamOptimizer(lr, beta1=s.adam_beta1, beta2=s.adam_beta2, epsilon=s.opt_epsilon),
    "ftrl": lambda lr, s: tf1.train.FtrlOptimizer(
        lr,
        learning_rate_power=s.ftrl_learning_rate_power,
        initial_accumulator_value=s.ftrl_initial_accumulator_value,
        l1_regularization_strength=s.ftrl_l1,
        l2_regularization_strength=s.ftrl_l2,
    ),
    "momentum": lambda lr, s: tf1.train.MomentumOptimizer(lr, momentum=s.momentum, name="Momentum"),
    "rmsprop": lambda lr, s: tf1.train.RMSPropOptimizer(
        lr, decay=s.rmsprop_decay, momentum=s.rmsprop_momentum, epsilon=s.opt_epsilon
    ),
    "sgd": lambda lr, s: tf1.train.GradientDescentOptimizer(lr),
}

OPTIMIZER_NAMES = tuple(_BUILDERS)


def check_optimizer_name(name: str) -> None:
    """Raise ValueError naming ``--optimizer`` unless ``name`` is one of ``OPTIMIZER_NAMES``."""
    if name not in _BUILDERS:
        raise ValueError(f"--optimizer={name!r} is not a known optimizer; use one of {', '.join(OPTIMIZER_NAMES)}.")


def make_optimizer(settings: OptimizerSettings, learning_rate: LearningRate) -> tf1.train.Optimizer:
    """Return the ``tf.compat.v1`` optimizer named by ``settings.optimizer``, configured from ``settings``."""
    check_optimizer_name(settings.optimizer)
    return _BUILDERS[settings.optimizer](learning_rate, settings)
