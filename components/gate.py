"""gate: the first step of every run. Asks the store to open a recurrence of the job (zeus_kfp.steps.gate): due
by its period or by drift, and a free slot under its cap. The pipeline's other steps run only when it
opened one (its one output, pipelines/dag.py); a skipped run ends here, its reason recorded in the store.

Takes every job setting, generated like preprocess (components/preprocess.py says why), since it registers
the job or checks its spec before it asks. One output, not a NamedTuple: kfp.local (2.17) cannot resolve a
named output in a condition (it reads `gate-opened` as a parent input and skips the branch), while the
single output `gate-Output` it resolves; the reason a run was skipped is in the store, not an output.
"""

from kfp.dsl.python_component import PythonComponent

from components.generated import generated_component
from components.image import LOCAL_IMAGE
from components.preprocess import settings_source
from zeus_kfp.job import JobSpec

TEMPLATE = '''\\
def gate(
$settings
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    owner: str,
    force: bool,
    dispatch_timeout_s: float,
) -> bool:
    """Opens a recurrence of the job, or skips this run: due (its period passed, or drift) and a free slot
    (fewer than max_running recurrences running, counted in the store).

    Args:
$settings_help
        store_uri: Where the store is: a directory, file:// or s3://bucket/prefix.
        run_id: The KFP run id, the recurrence's id unless recurrence_id is given.
        recurrence_id: The recurrence's id ("" for the KFP run id).
        owner: Who runs the job, recorded with it in the store.
        force: Open a recurrence even if it is not due (it still takes a slot under the cap).
        dispatch_timeout_s: Seconds after which a recurrence with no news counts as no longer running.

    Returns:
        Whether this run is a recurrence (false: it ends here and trains nothing; the store says why).
    """
    from zeus_kfp import steps

    settings = dict(
$settings_args
    )
    return steps.gate(
        settings,
        store_uri=store_uri,
        run_id=run_id,
        recurrence_id=recurrence_id,
        owner=owner,
        force=force,
        dispatch_timeout_s=dispatch_timeout_s,
    )
'''


def make_gate(spec_cls: type[JobSpec] = JobSpec, base_image: str = LOCAL_IMAGE) -> PythonComponent:
    """The gate component for `spec_cls` (JobSpec, or a JobSpec with more settings) on `base_image`."""
    return generated_component(
        settings_source(TEMPLATE, spec_cls),
        function="gate",
        declared_by=spec_cls,
        namespace={},
        base_image=base_image,
    )


gate = make_gate()
