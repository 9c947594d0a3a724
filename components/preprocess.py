"""preprocess: once per recurrence. Validates the job settings, registers or checks the job in
the store, opens the recurrence and writes the Dataset the trials train on."""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Output

from components.image import ZEUS_KFP_IMAGE


@dsl.component(base_image=ZEUS_KFP_IMAGE, install_kfp_package=False)
def preprocess(
    job_id: str,
    batch_sizes: list,
    default_batch_size: int,
    target_metric: float,
    max_epochs: int,
    higher_is_better: bool,
    metric_name: str,
    eta_knob: float,
    beta_knob: float,
    max_attempts: int,
    num_pruning_rounds: int,
    window_size: int,
    seed: int,
    num_gpus: int,
    max_power_w: float,
    reprofile_after: int,
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    preprocess_ref: str,
    owner: str,
    data: Output[Dataset],
) -> NamedTuple("PreprocessOutputs", spec_json=str, recurrence_id=str, recurrence=int):
    """Job settings (JobSpec fields; beta_knob <= 0 = no early stop) -> the validated spec as JSON,
    the recurrence id (recurrence_id if given, else the KFP run id) and its number."""
    from zeus import steps

    params = dict(
        job_id=job_id,
        batch_sizes=batch_sizes,
        default_batch_size=default_batch_size,
        target_metric=target_metric,
        max_epochs=max_epochs,
        higher_is_better=higher_is_better,
        metric_name=metric_name,
        eta_knob=eta_knob,
        beta_knob=beta_knob,
        max_attempts=max_attempts,
        num_pruning_rounds=num_pruning_rounds,
        window_size=window_size,
        seed=seed,
        num_gpus=num_gpus,
        max_power_w=max_power_w,
        reprofile_after=reprofile_after,
    )
    return steps.preprocess(
        params,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        data_dir=data.path,
        preprocess_ref=preprocess_ref,
        owner=owner,
    )
