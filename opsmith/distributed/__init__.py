"""opsmith across GPUs: DTensor sharding rules derived from each op's declaration (``sharding.py``), a
declared backward run on DTensors (``backward.py``), and one tuning decision per job (``tuning.py``).

Nothing here imports ``torch.distributed.tensor`` until DTensor is in use: an op registered before it is
imported gets its rule when it is (0.5 s of import that a single-GPU process never pays).
"""

from .sharding import ShardingPlan, derive_plan

__all__ = ["ShardingPlan", "derive_plan"]
