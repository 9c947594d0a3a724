"""Typed artifacts for the pipeline's outputs.

kfp 2.17 accepts only the `system.` and `google.` schema namespaces (a `zeus.PowerProfile`
schema_title is refused at decoration time), so the power profile is a Dataset subclass: the
KFP UI lists it as a dataset (it is a Parquet table), and code that reads the pipeline can still
tell it apart by its metadata `kind`. The executor imports this class from here, so it lives in
this package (installed in the component image), not in zeus/; and this package's __init__
imports nothing, because the executor imports this module while kfp.dsl is half-initialised.
"""

from kfp import dsl

from zeus_kfp.steps.params import PROFILE_KIND  # noqa: F401  (the metadata kind train writes)


class PowerProfile(dsl.Dataset):
    """A trial's just-in-time power profile: zeus_kfp.profiles.PowerProfile.to_parquet's file (the columns of
    PROFILE_SCHEMA: phase, power_limit_w, average_power_w, throughput, simulated, gpu), the same bytes as the
    trial's log dir and a cluster trial's handoff hold; read with PowerProfile.read_parquet. metadata: kind,
    rows, simulated (True when no real GPU was measured; such figures are simulated and labelled so)."""
