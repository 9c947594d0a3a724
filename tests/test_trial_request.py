"""One declaration of what the train step is asked for (zeus/zeus_kfp/steps/request.py): the train component, the
pipeline's launch parameters and every attempt's wiring follow it, and a TrialRequest with one more field
is picked up by all of them with no other edit than `make sources` (tests/test_sources.py).

The oracle is the dataclass itself, read here with dataclasses.fields (not zeus_kfp.steps.request's readers),
a table written by hand of how each annotation travels as a KFP parameter, and of how each source appears
in a compiled task's inputs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
import yaml
from kfp import compiler

from zeus_kfp.components.train import train
from zeus_kfp.job import JobSpec
from zeus_kfp.pipelines.dag import build_pipeline
from zeus_kfp.pipelines.sources import recurrence_source, train_source
from zeus_kfp.settings import SETTING
from zeus_kfp.steps.request import WIRED, Source, TrialRequest, request_field, request_fields

KFP_TYPES = {"str": "STRING", "int": "NUMBER_INTEGER", "float": "NUMBER_DOUBLE", "bool": "BOOLEAN", "list[str]": "LIST"}
ARTIFACT_INPUTS = {"data", "reuse_profile"}
ARTIFACT_OUTPUTS = {"profile", "metrics", "model", "trial_log"}
SPEC = JobSpec(job_id="request", batch_sizes=(8, 16), default_batch_size=8, target_metric=0.5, max_epochs=3)


@dataclass(frozen=True, kw_only=True)
class WithRestarts(TrialRequest):
    """TrialRequest and one more launch setting, added the way a maintainer adds one: one field."""

    max_restarts: int = request_field("Restarts of a failed cluster trial.", 2, source=Source.RUN)


def declared(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def wired_name(field: dataclasses.Field) -> str:
    return field.metadata[WIRED].name or field.name


@pytest.mark.parametrize("cls", [TrialRequest, WithRestarts])
def test_the_train_component_takes_every_request_field_with_its_type_default_and_description(cls, tmp_path) -> None:
    """The checked-in component, and the one `make sources` writes for a request with one more field."""
    from written import load_written

    component = train if cls is TrialRequest else load_written(train_source(cls), tmp_path, "train_restarts").train
    spec = component.component_spec
    assert set(spec.inputs) == set(declared(cls)) | ARTIFACT_INPUTS
    for name, field in declared(cls).items():
        assert spec.inputs[name].description == field.metadata[SETTING].help, name
        if field.default is dataclasses.MISSING:
            assert not spec.inputs[name].optional, name
        else:
            assert spec.inputs[name].default == field.default, name
    # one result: the trial's, for feedback; the scalars it used to repeat are gone
    assert set(spec.outputs) == {"result_json"} | ARTIFACT_OUTPUTS


def compiled(tmp_path) -> dict:
    path = tmp_path / "p.yaml"
    compiler.Compiler().compile(build_pipeline(SPEC, ["true"], attempts=2), str(path))
    return yaml.safe_load(path.read_text())


def train_tasks(pipeline: dict) -> dict[int, dict]:
    """attempt -> its train task, from the root DAG (attempt 1) and the condition DAGs (the others)."""
    dags = [pipeline["root"]["dag"]] + [c["dag"] for c in pipeline["components"].values() if "dag" in c]
    return {
        int(name.split("-")[1]): task
        for dag in dags
        for name, task in dag["tasks"].items()
        if name.startswith("attempt-") and name.endswith("-train")
    }


def expected_binding(field: dataclasses.Field, attempt: int) -> dict:
    """How a task's input from this field's declared source reads in the compiled pipeline (every attempt sits in
    a condition DAG, the gate's and then the attempts', which receives the root's values as pipelinechannel--...;
    attempt 1 shares the gate's condition with preprocess, a later one gets preprocess's outputs passed down)."""
    source, name = field.metadata[WIRED].source, wired_name(field)
    nested = attempt > 1
    if source is Source.RUN:
        return {"componentInputParameter": f"pipelinechannel--{name}"}
    if source is Source.PREPROCESS:
        if nested:
            return {"componentInputParameter": f"pipelinechannel--preprocess-{name}"}
        return {"taskOutputParameter": {"outputParameterKey": name, "producerTask": "preprocess"}}
    if source is Source.BANDIT:
        return {"taskOutputParameter": {"outputParameterKey": name, "producerTask": f"attempt-{attempt}-bandit"}}
    assert source is Source.ATTEMPT
    return {"runtimeValue": {"constant": attempt}}


def test_every_train_task_takes_every_field_from_where_it_is_declared(tmp_path) -> None:
    cls = TrialRequest
    pipeline = compiled(tmp_path)
    tasks = train_tasks(pipeline)
    assert sorted(tasks) == [1, 2]
    for attempt, task in tasks.items():
        bound = task["inputs"]["parameters"]
        assert set(bound) == set(declared(cls)), attempt
        for name, field in declared(cls).items():
            assert bound[name] == expected_binding(field, attempt), (attempt, name)
    params = pipeline["root"]["inputDefinitions"]["parameters"]
    for name, field in declared(cls).items():  # a run-wired field is a run parameter, typed and described
        if field.metadata[WIRED].source is Source.RUN:
            param = params[wired_name(field)]
            assert param["parameterType"] == KFP_TYPES[str(field.type)], name
            assert param["description"] == field.metadata[SETTING].help, name


def test_a_new_run_wired_field_is_a_pipeline_parameter_of_the_written_out_function(tmp_path) -> None:
    """What `make sources` writes for a request with one more run-wired field: the pipeline function takes it,
    typed; pipelines/dag.py then gives it its declared default (nothing else said)."""
    import inspect

    from written import load_written

    function = load_written(recurrence_source(request_cls=WithRestarts), tmp_path, "recurrence_restarts")
    parameters = inspect.signature(function.recurrence_function(lambda given: None)).parameters
    assert parameters["max_restarts"].annotation is int
    assert declared(WithRestarts)["max_restarts"].default == 2


def test_the_wiring_the_pipeline_has_always_had() -> None:
    """The names outside the request that the compiled interface has always used (run parameters and bandit
    outputs named unlike train's inputs); a change here changes the pipeline every user compiled."""
    fields = declared(TrialRequest)
    assert (fields["command"].metadata[WIRED].source, wired_name(fields["command"])) == (Source.RUN, "train_command")
    assert (fields["seed"].metadata[WIRED].source, wired_name(fields["seed"])) == (Source.BANDIT, "trial_seed")
    assert fields["attempt"].metadata[WIRED].source is Source.ATTEMPT


def test_a_field_declared_without_its_source_is_refused() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Unwired(TrialRequest):
        max_restarts: int = 2

    with pytest.raises(TypeError, match=r"Unwired\.max_restarts is declared without request_field"):
        request_fields(Unwired)
