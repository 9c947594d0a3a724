"""The step after the gate, in a run the gate let through: begin the recurrence the gate opened (the store
hands back its number), and run the user's preprocessing once (not once per trial). It takes no job setting:
the gate alone takes them and agrees the job's spec with the store; this step reads the spec the recurrence
opened under from the store and hands it to the trials (train's spec_json)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from zeus_kfp.job import JobSpec
from zeus_kfp.steps.params import open_step_store
from zeus_kfp.steps.step_events import reported
from zeus_kfp.steps.step_lines import RECURRENCE

PASS_THROUGH_NOTE = "pass-through: no preprocessing configured; the training script reads its own data\n"


class StepError(RuntimeError):
    """A pipeline step cannot go on; the message says what to check."""


@dataclass(frozen=True)
class Prepared:
    spec: JobSpec
    recurrence_id: str
    recurrence: int


def prepare(job_id: str, *, store_uri: str, recurrence_id: str, data_dir: str | Path, preprocess: str = "") -> Prepared:
    """Begin the recurrence the gate opened (a skipped one is refused), mark the job running, preprocess; the spec
    the recurrence opened under, which its trials train to."""
    if not recurrence_id:
        raise StepError("recurrence_id is empty: pass the KFP run id (dsl.PIPELINE_JOB_ID_PLACEHOLDER) or a name")
    store = open_step_store(store_uri)
    number = store.begin_recurrence(job_id, recurrence_id)
    spec = store.recurrence_spec(job_id, recurrence_id)
    store.set_phase(job_id, "running")  # the report step sets "completed"; the latest event wins
    run_preprocess(preprocess, Path(data_dir))
    return Prepared(spec=spec, recurrence_id=recurrence_id, recurrence=number)


def run_preprocess(preprocess: str, out_dir: Path) -> None:
    """Fill `out_dir` with the recurrence's data.

    `preprocess` is one of: "" (pass-through: a note is written, the script reads its own data);
    "package.module:function" or "path/to/file.py:function" (called with out_dir); or a shell-style
    command in which "{output}" is replaced by out_dir.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    preprocess = preprocess.strip()
    if not preprocess:
        (out_dir / "README.txt").write_text(PASS_THROUGH_NOTE)
        return
    if _is_callable_ref(preprocess):
        load_callable(preprocess)(out_dir)
        return
    argv = [part.replace("{output}", str(out_dir)) for part in shlex.split(preprocess)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise StepError(f"preprocess command {argv!r} exited with {proc.returncode}: {tail}")


def _is_callable_ref(text: str) -> bool:
    if any(ch.isspace() for ch in text) or text.count(":") != 1:
        return False
    module, func = text.split(":")
    return bool(module) and func.isidentifier()


def load_callable(ref: str, what: str = "preprocess"):
    """The function `ref` names ("package.module:function" or "path/to/file.py:function"); StepError saying
    what is missing (`what`: whose function it is, for the message)."""
    module_ref, func_name = ref.split(":")
    if module_ref.endswith(".py"):
        path = Path(module_ref)
        if not path.is_file():
            raise StepError(f"{what} file {str(path)!r} not found (from {ref!r}); give an absolute path")
        spec = importlib.util.spec_from_file_location(f"zeus_{what.replace(' ', '_')}_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_ref)
        except ImportError as err:
            raise StepError(f"cannot import {what} module {module_ref!r} (from {ref!r}): {err}") from err
    func = getattr(module, func_name, None)
    if not callable(func):
        raise StepError(f"{what} function {func_name!r} not found in {module_ref!r}")
    return func


@reported("preprocess")
def preprocess(
    job_id: str,
    *,
    store_uri: str,
    run_id: str,
    recurrence_id: str,
    data_dir: str,
    preprocess_ref: str,
) -> tuple[str, str, int]:
    """The preprocess step: the job and its recurrence in, (spec_json, recurrence_id, recurrence) out.

    `recurrence_id` overrides the KFP run id when given (local runs name their recurrences). The job's spec is the
    store's (the gate registered or checked it); `preprocess_ref` is what `run_preprocess` runs ("" for none).
    """
    prepared = prepare(
        job_id,
        store_uri=store_uri,
        recurrence_id=recurrence_id or run_id,
        data_dir=data_dir,
        preprocess=preprocess_ref,
    )
    print(RECURRENCE.say(f"{prepared.recurrence} ({prepared.recurrence_id})"))  # pipelines.local reads it
    return json.dumps(prepared.spec.to_dict()), prepared.recurrence_id, prepared.recurrence
