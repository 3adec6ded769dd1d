"""Look up a network of the zoo by its official TF-Slim name and build it inside its arg_scope.

Each network module is imported only when one of its names is looked up, so
the factory works for every module present and names the missing module
otherwise.
"""

import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Tuple

import tensorflow as tf
import tf_slim as slim


@dataclass(frozen=True)
class NetworkEntry:
    """Where a network lives: its function, and its arg_scope function (possibly in another module)."""

    module: str
    function: str
    arg_scope_module: str
    arg_scope: str


def _family(
    module: str, arg_scope: str, *names: str, function: str = "{name}", arg_scope_module: Optional[str] = None
) -> dict:
    """Entries of one module keyed by network name; ``function``/``arg_scope`` may use ``{name}``."""
    return {
        name: NetworkEntry(module, function.format(name=name), arg_scope_module or module, arg_scope.format(name=name))
        for name in names
    }


NETWORK_ENTRIES = {
    **_family("nets.alexnet", "alexnet_v2_arg_scope", "alexnet_v2"),
    **_family("nets.cifarnet", "cifarnet_arg_scope", "cifarnet"),
    **_family("nets.overfeat", "overfeat_arg_scope", "overfeat"),
    **_family("nets.vgg", "vgg_arg_scope", "vgg_a", "vgg_16", "vgg_19"),
    **_family(
        "nets.inception",
        "{name}_arg_scope",
        "inception_v1",
        "inception_v2",
        "inception_v3",
        "inception_v4",
        "inception_resnet_v2",
    ),
    **_family("nets.i3d", "i3d_arg_scope", "i3d"),
    **_family("nets.s3dg", "s3dg_arg_scope", "s3dg"),
    **_family("nets.lenet", "lenet_arg_scope", "lenet"),
    **_family("nets.resnet_v1", "resnet_arg_scope", "resnet_v1_50", "resnet_v1_101", "resnet_v1_152", "resnet_v1_200"),
    **_family("nets.resnet_v2", "resnet_arg_scope", "resnet_v2_50", "resnet_v2_101", "resnet_v2_152", "resnet_v2_200"),
    # Our basic-block ResNets (not in the official factory) live in nets.resnet_v1 too.
    **_family("nets.resnet_v1", "resnet_arg_scope", "resnet_v1_18", "resnet_v1_34"),
    **_family(
        "nets.mobilenet_v1",
        "mobilenet_v1_arg_scope",
        "mobilenet_v1",
        "mobilenet_v1_075",
        "mobilenet_v1_050",
        "mobilenet_v1_025",
    ),
    **_family("nets.mobilenet.mobilenet_v2", "training_scope", "mobilenet_v2", function="mobilenet"),
    **_family("nets.mobilenet.mobilenet_v2", "training_scope", "mobilenet_v2_140", "mobilenet_v2_035"),
    # The official factory names of the v3 functions (``large``, ``edge_tpu``, ...) differ from the functions'.
    **{
        name: NetworkEntry("nets.mobilenet.mobilenet_v3", function, "nets.mobilenet.mobilenet_v3", "training_scope")
        for name, function in (
            ("mobilenet_v3_small", "small"),
            ("mobilenet_v3_large", "large"),
            ("mobilenet_v3_small_minimalistic", "small_minimalistic"),
            ("mobilenet_v3_large_minimalistic", "large_minimalistic"),
            ("mobilenet_edgetpu", "edge_tpu"),
            ("mobilenet_edgetpu_075", "edge_tpu_075"),
        )
    },
    **_family(
        "nets.nasnet.nasnet",
        "{name}_arg_scope",
        "nasnet_cifar",
        "nasnet_mobile",
        "nasnet_large",
        function="build_{name}",
    ),
    **_family("nets.nasnet.pnasnet", "{name}_arg_scope", "pnasnet_mobile", "pnasnet_large", function="build_{name}"),
}


def network_names() -> list:
    """All network names the factory knows, sorted."""
    return sorted(NETWORK_ENTRIES)


def check_network_name(name: str, argument: str = "name") -> NetworkEntry:
    """The entry of ``name``, or a ValueError naming ``argument`` with the closest and all valid names."""
    if not isinstance(name, str):
        raise TypeError(f"{argument}={name!r} must be a network name string such as 'resnet_v1_50'.")
    if name in NETWORK_ENTRIES:
        return NETWORK_ENTRIES[name]
    closest = difflib.get_close_matches(name, NETWORK_ENTRIES, n=3)
    hint = f" (did you mean {', '.join(repr(match) for match in closest)}?)" if closest else ""
    raise ValueError(f"{argument}={name!r} is not a known network{hint}; use one of: {', '.join(network_names())}.")


def _import_attribute(module_name: str, attribute: str, network: str) -> Callable:
    """Import ``module_name`` and return its ``attribute``; ImportError naming the module when it is missing."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        raise ImportError(
            f"Network {network!r} needs module {module_name}, which does not exist yet; add it "
            f"(with {attribute}) or pick another network."
        ) from error
    if not hasattr(module, attribute):
        raise ImportError(f"Network {network!r} needs {module_name}.{attribute}, which the module does not define.")
    return getattr(module, attribute)


def network_function(name: str) -> Callable:
    """The network function of ``name`` (imports its module)."""
    entry = check_network_name(name)
    return _import_attribute(entry.module, entry.function, name)


def arg_scope_function(name: str) -> Callable:
    """The arg_scope function of ``name`` (imports its module)."""
    entry = check_network_name(name)
    return _import_attribute(entry.arg_scope_module, entry.arg_scope, name)


class _LazyFunctions(Mapping):
    """A read-only name -> function mapping that imports each module on first lookup."""

    def __init__(self, resolve: Callable[[str], Callable]) -> None:
        self._resolve = resolve

    def __getitem__(self, name: str) -> Callable:
        if name not in NETWORK_ENTRIES:
            raise KeyError(name)
        return self._resolve(name)

    def __iter__(self) -> Iterator[str]:
        return iter(network_names())

    def __len__(self) -> int:
        return len(NETWORK_ENTRIES)


networks_map = _LazyFunctions(network_function)
arg_scopes_map = _LazyFunctions(arg_scope_function)


BATCH_NORM_KEY = slim.arg_scope_func_key(slim.batch_norm)


def _batch_norm_arguments(scope: dict) -> Iterator[Tuple[str, ...]]:
    """Where an arg scope sets batch norm's decay: ``(op key,)`` or ``(op key, "normalizer_params")`` paths."""
    for key, arguments in scope.items():
        if key == BATCH_NORM_KEY and "decay" in arguments:
            yield (key,)
        elif "decay" in (arguments.get("normalizer_params") or {}):  # e.g. Inception's conv2d normalizer_params
            yield (key, "normalizer_params")


def _decay_at(scope: dict, path: Tuple[str, ...]) -> float:
    arguments = scope[path[0]]
    return (arguments[path[1]] if len(path) > 1 else arguments)["decay"]


def _with_decay(scope: dict, path: Tuple[str, ...], decay: float) -> dict:
    """``scope`` with the batch-norm decay at ``path`` replaced by ``decay`` (the scope itself is left unchanged)."""
    key, *inner = path
    arguments = dict(scope[key])
    if inner:
        arguments[inner[0]] = {**arguments[inner[0]], "decay": decay}
    else:
        arguments["decay"] = decay
    return {**scope, key: arguments}


def batch_norm_decay(name: str) -> Optional[float]:
    """The decay of batch norm's moving averages that network ``name``'s arg scope sets; None if it sets none."""
    scope = arg_scope_function(name)()
    decays = {_decay_at(scope, path) for path in _batch_norm_arguments(scope)}
    return max(decays) if decays else None


def get_network_fn(
    name: str,
    num_classes: Optional[int],
    weight_decay: float = 0.0,
    is_training: bool = False,
    batch_norm_decay: Optional[float] = None,
    **kwargs,
) -> Callable:
    """Return ``network_fn(images, **overrides) -> (logits, end_points)`` for the network ``name``.

    The network is built inside its arg_scope (called with ``weight_decay``),
    with ``num_classes``, ``is_training`` and ``kwargs`` (overridable per call)
    passed to the network function. ``network_fn.default_image_size`` is the
    network's own. ``batch_norm_decay`` (not an official argument) replaces the decay of batch
    norm's moving averages that the arg scope sets, e.g. for runs too short for MobileNet's 0.9997;
    a network whose arg scope has no batch norm raises ValueError.
    """
    network = network_function(name)
    arg_scope = arg_scope_function(name)
    if batch_norm_decay is not None and not any(_batch_norm_arguments(arg_scope())):
        raise ValueError(f"batch_norm_decay={batch_norm_decay}: network {name!r} sets no batch-norm decay in its arg "
                         "scope; leave batch_norm_decay unset for it.")

    def scope_with_decay() -> dict:
        scope = arg_scope(weight_decay=weight_decay)
        if batch_norm_decay is not None:
            for path in list(_batch_norm_arguments(scope)):
                scope = _with_decay(scope, path, batch_norm_decay)
        return scope

    def network_fn(images: tf.Tensor, **overrides) -> tuple:
        with slim.arg_scope(scope_with_decay()):
            return network(images, num_classes=num_classes, is_training=is_training, **{**kwargs, **overrides})

    network_fn.__name__ = name
    network_fn.__doc__ = network.__doc__
    network_fn.default_image_size = getattr(network, "default_image_size", None)
    return network_fn
