"""The bottom layer: the configuration and the request and result types every other subpackage speaks."""

from trl_verigate.lean_server.core import types
from trl_verigate.lean_server.core.types import *  # noqa: F403

__all__ = types.__all__
