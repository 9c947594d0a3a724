"""train: one trial of the user's training script at the bandit's batch size, with just-in-time
power-limit profiling. Touches the store only to read back a cluster trial's result (launcher trainjob or
pytorchjob); its result feeds the feedback step.

Generated from TEMPLATE and the declared trial request (zeus_kfp.steps.request.TrialRequest), the way
components/generated.py says: every request field is a typed, described parameter, and the body hands the
step the request as one value. tests/test_trial_request.py compares the component with the declaration.

Its outputs: the trial's result as JSON (what feedback records), the power profile it measured, the model,
the trial's log, and a Metrics artifact (energy, time, cost, epochs, ...): the KFP UI shows it beside the
step, and benchmarks/pipeline.py reads its wall_s and script_cpu_s. Nothing else: the result's scalars as
separate outputs were read by no step.
"""

from string import Template
from typing import NamedTuple

from kfp.dsl import Artifact, Dataset, Input, Metrics, Model, Output
from kfp.dsl.python_component import PythonComponent

from components.artifacts import PowerProfile
from components.generated import generated_component
from components.image import LOCAL_TRAIN_IMAGE
from zeus_kfp.settings import SettingField
from zeus_kfp.steps.params import param_type
from zeus_kfp.steps.request import TrialRequest, request_fields

# $required and $optional become one parameter per request field (those without a default, then those with
# one: Python wants them in that order); $fields_help a line of Args each, $fields_args an argument each.
TEMPLATE = '''\
def train(
$required
    data: Input[Dataset],
    reuse_profile: Input[Dataset],
    profile: Output[PowerProfile],
    metrics: Output[Metrics],
    model: Output[Model],
    trial_log: Output[Artifact],
$optional
) -> NamedTuple("TrainOutputs", result_json=str):
    """Runs one trial of the training script at the bandit's batch size, with just-in-time power-limit
    profiling. A failing script, or a bad input, does not fail the step: the trial comes back 'failed' with
    the error, feedback records it and the recurrence ends.

    Args:
$fields_help
        data: The recurrence's data directory (preprocess's output).
        reuse_profile: A stored power profile to train at (an empty table: profile this trial).
        profile: The power profile the trial measured.
        metrics: The trial's energy, time, cost, epochs, batch size and power limit.
        model: The model the script saved (a note when it saved none).
        trial_log: The trial's log: the script's stdout and stderr, result.json, what the collector read, and
            whatever else the script wrote to {log_dir} but the model.

    Returns:
        result_json: The trial's zeus_kfp.job.TrialResult as JSON, for feedback.
    """
    from zeus_kfp import steps
    from $request_module import $request_name

    request = $request_name(
$fields_args
    )
    result = steps.train(
        request,
        data_dir=data.path,
        reuse_profile_path=reuse_profile.path,
        profile=profile,
        metrics=metrics,
        model=model,
        trial_log=trial_log,
    )
    return (result.to_json(),)
'''


def train_source(request_cls: type[TrialRequest] = TrialRequest) -> str:
    """The train component's function, as the text KFP embeds, for `request_cls`'s fields."""
    fields = request_fields(request_cls)

    def parameter(f: SettingField) -> str:
        return f"    {f.name}: {param_type(f).__name__}" + ("," if f.required else f" = {f.default!r},")

    return Template(TEMPLATE).substitute(
        required="\n".join(parameter(f) for f in fields if f.required),
        optional="\n".join(parameter(f) for f in fields if not f.required),
        fields_help="\n".join(f"        {f.name}: {f.setting.help}" for f in fields),
        fields_args="\n".join(f"        {f.name}={f.name}," for f in fields),
        request_module=request_cls.__module__,
        request_name=request_cls.__qualname__,
    )


def make_train(request_cls: type[TrialRequest] = TrialRequest, base_image: str = LOCAL_TRAIN_IMAGE) -> PythonComponent:
    """The train component for `request_cls` (TrialRequest, or one with more fields) on `base_image`."""
    namespace = {
        "NamedTuple": NamedTuple,
        "Input": Input,
        "Output": Output,
        "Dataset": Dataset,
        "PowerProfile": PowerProfile,
        "Metrics": Metrics,
        "Model": Model,
        "Artifact": Artifact,
    }
    return generated_component(
        train_source(request_cls), function="train", declared_by=request_cls, namespace=namespace, base_image=base_image
    )


train = make_train()
