"""preprocess: once per recurrence, in a run the gate opened. Begins the recurrence, writes the Dataset the
trials train on, and hands the trials the job's spec as the store holds it (zeus_kfp.steps.preprocess).

It takes no job setting: the gate alone takes them and agrees the spec with the store, so a setting crosses
KFP once; this step reads the spec the recurrence opened under.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Output

from zeus_kfp.components.image import LOCAL_IMAGE


@dsl.component(base_image=LOCAL_IMAGE, install_kfp_package=False)
def preprocess(
    job_id: str,
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    preprocess_ref: str,
    data: Output[Dataset],
) -> NamedTuple("PreprocessOutputs", spec_json=str, recurrence_id=str, recurrence=int):
    """Begins the recurrence the gate opened and runs the user's preprocessing once, into `data`.

    Args:
        job_id: The job, as the gate registered or checked it.
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        run_id: The KFP run id, the recurrence's id unless recurrence_id is given.
        recurrence_id: The recurrence's id ("" for the KFP run id).
        preprocess_ref: What fills `data`: module:function, file.py:function or a command ("" for none).
        data: The recurrence's data directory, which every trial of it trains on.

    Returns:
        spec_json: The job's JobSpec as JSON, the one the recurrence opened under.
        recurrence_id: The recurrence's id.
        recurrence: The recurrence's number within the job.
    """
    from zeus_kfp.steps.preprocess import preprocess as step

    return step(
        job_id,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        data_dir=data.path,
        preprocess_ref=preprocess_ref,
    )
