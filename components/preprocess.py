"""preprocess: once per recurrence. Validates the job settings, registers or checks the job in
the store, opens the recurrence and writes the Dataset the trials train on.

Generated from TEMPLATE and the JobSpec's declared settings (zeus_kfp.settings), the way
components/generated.py says. Written out by hand, the settings here were a second copy of zeus/job.py
(a new setting took edits here, in the pipeline and in the step); now the declaration is the only copy.
tests/test_job_fields.py compares the compiled component with the declaration.

Chosen over: one `spec_json` parameter (the KFP UI would lose a typed, described field per setting
and `--param max_epochs=10` would become JSON), and a hand-written list checked by a test (still
two edits per setting).
"""

from string import Template
from typing import NamedTuple

from kfp.dsl import Dataset, Output
from kfp.dsl.python_component import PythonComponent

from components.generated import generated_component
from components.image import LOCAL_IMAGE
from zeus_kfp.job import JobSpec
from zeus_kfp.settings import settings_of
from zeus_kfp.steps.params import param_type

# $settings, $settings_help and $settings_args become one line per JobSpec setting.
TEMPLATE = '''\
def preprocess(
$settings
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    preprocess_ref: str,
    owner: str,
    data: Output[Dataset],
) -> NamedTuple("PreprocessOutputs", spec_json=str, recurrence_id=str, recurrence=int):
    """Validates the job's settings (a JobSpec), registers the job in the store on its first recurrence
    or checks it, opens the recurrence and runs the user's preprocessing once, into `data`.

    Args:
$settings_help
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        run_id: The KFP run id, the recurrence's id unless recurrence_id is given.
        recurrence_id: The recurrence's id ("" for the KFP run id).
        preprocess_ref: What fills `data`: module:function, file.py:function or a command ("" for none).
        owner: Who runs the job, recorded with it in the store.
        data: The recurrence's data directory, which every trial of it trains on.

    Returns:
        spec_json: The validated JobSpec as JSON.
        recurrence_id: The recurrence's id.
        recurrence: The recurrence's number within the job.
    """
    from zeus_kfp import steps

    settings = dict(
$settings_args
    )
    return steps.preprocess(
        settings,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        data_dir=data.path,
        preprocess_ref=preprocess_ref,
        owner=owner,
    )
'''


def settings_source(template: str, spec_cls: type[JobSpec]) -> str:
    """`template` with $settings, $settings_help and $settings_args written out for `spec_cls`'s settings: the
    text of a component that takes every job setting (preprocess, and the recurrence gate)."""
    fields = settings_of(spec_cls)
    return Template(template).substitute(
        settings="\n".join(f"    {f.name}: {param_type(f).__name__}," for f in fields),
        settings_help="\n".join(f"        {f.name}: {f.pipeline_help()}" for f in fields),
        settings_args="\n".join(f"        {f.name}={f.name}," for f in fields),
    )


def preprocess_source(spec_cls: type[JobSpec] = JobSpec) -> str:
    """The preprocess component's function, as the text KFP embeds, for `spec_cls`'s settings."""
    return settings_source(TEMPLATE, spec_cls)


def make_preprocess(spec_cls: type[JobSpec] = JobSpec, base_image: str = LOCAL_IMAGE) -> PythonComponent:
    """The preprocess component for `spec_cls` (JobSpec, or a JobSpec with more settings) on `base_image`."""
    namespace = {"Output": Output, "Dataset": Dataset, "NamedTuple": NamedTuple}
    return generated_component(
        preprocess_source(spec_cls),
        function="preprocess",
        declared_by=spec_cls,
        namespace=namespace,
        base_image=base_image,
    )


preprocess = make_preprocess()
