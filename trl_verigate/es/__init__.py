"""Evolution strategies: the pure parts (noise, population, fitness, update, state) used by `ESTrainer`."""

from trl_verigate.es.noise import NOISE_VERSION, es_noise
from trl_verigate.es.population import population_seeds, shape_fitness
from trl_verigate.es.update import es_update, make_master, perturb, write_master

__all__ = [
    "NOISE_VERSION",
    "es_noise",
    "es_update",
    "make_master",
    "perturb",
    "population_seeds",
    "shape_fitness",
    "write_master",
]
