"""Evolution strategies beside `ESTrainer`: noise, population and fitness, the fp32-master update, es_state.json,
how a member generates and is rewarded, and the `es-export` command.

Names resolve lazily, so `trl_verigate.es.export` (the `es-export` CLI's parser) imports without torch.
"""

from importlib import import_module

_EXPORTS = {
    "NOISE_VERSION": "trl_verigate.es.noise",
    "es_noise": "trl_verigate.es.noise",
    "population_seeds": "trl_verigate.es.population",
    "shape_fitness": "trl_verigate.es.population",
    "es_update": "trl_verigate.es.update",
    "make_master": "trl_verigate.es.update",
    "perturb": "trl_verigate.es.update",
    "write_master": "trl_verigate.es.update",
    "reconstruct": "trl_verigate.es.export",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'trl_verigate.es' has no attribute {name!r}")
