"""The power-profile table's schema, defined once: what the JIT profiler measures (zeus.power.profiler),
a trial hands over (zeus.train.artifacts, the train step's PowerProfile artifact), the store keeps
(zeus.store: the `profiles` stream, each row keyed by its trial) and every power-limit choice reads.

One row per (phase, power limit): the average power in watts over all the job's GPUs and the
throughput in units of work per second (samples, or epochs for a trace or an epoch counter), and
whether the figures are simulated. Types are given by name so pandas (`astype`) and pyarrow
(`pa.type_for_alias`) read the same declaration; this module imports neither, so the store's light
paths (the bandit step) do not pay for pandas.
"""

from __future__ import annotations

PROFILE_SCHEMA: tuple[tuple[str, str], ...] = (
    ("phase", "string"),  # one of PROFILE_PHASES
    ("power_limit_w", "float64"),
    ("average_power_w", "float64"),
    ("throughput", "float64"),
    ("simulated", "bool"),
)
PROFILE_COLUMNS = tuple(name for name, _ in PROFILE_SCHEMA)
PROFILE_PHASES = ("train", "eval")  # training steps at each limit; eval at the chosen one
