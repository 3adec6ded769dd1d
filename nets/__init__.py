"""TF-Slim network definitions with the official variable names."""

from slim_mp import compat as _compat
_compat.install()
