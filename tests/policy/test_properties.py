"""Properties of the policies over generated histories (hypothesis).

Two generators. `histories`: any interleaving of recurrences, each a run of trials that did not reach
(not_reached, cost_exceeded, oom, failed) ended by one that reached, one more miss (out of attempts) or
one still dispatched; recurrences overlap in trial order. `driven`: the policy itself runs a job with
up to four recurrences in flight, on a hidden cost curve and memory limit the generator draws, so the
histories are the ones a policy actually makes, exploitation included. Examples are derandomized so
CI sees the same ones every run.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.policy.helpers import make_spec, record
from zeus_kfp.job import JobSpec
from zeus_kfp.policy import POLICY_NAMES, NoFeasibleBatchSizeError, get_policy
from zeus_kfp.trials import Trial

ALL_SIZES = (8, 16, 32, 64, 128, 256, 512)
MISSES = ("not_reached", "cost_exceeded", "oom", "failed")
# No deadline and no too_slow health check: both are wall-clock limits, and CI runs at load 10-25.
FAST = settings(
    max_examples=80, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def specs(draw) -> JobSpec:
    sizes = draw(st.lists(st.sampled_from(ALL_SIZES), min_size=1, max_size=7, unique=True))
    return make_spec(
        batch_sizes=tuple(sizes),
        default_batch_size=draw(st.sampled_from(sorted(sizes))),
        beta_knob=draw(st.sampled_from([None, 1.5, 2.0])),
        window_size=draw(st.sampled_from([0, 0, 1, 3])),
    )


costs = st.floats(min_value=1.0, max_value=100.0, allow_nan=False)


@st.composite
def histories(draw, spec: JobSpec) -> list[Trial]:
    """Recurrences of misses ended by a reach, a miss or an in-flight trial, interleaved in trial order."""
    recurrences = []
    for _ in range(draw(st.integers(0, 10))):
        misses = range(draw(st.integers(0, 3)))
        trials = [(draw(st.sampled_from(spec.batch_sizes)), draw(st.sampled_from(MISSES))) for _ in misses]
        end = draw(st.sampled_from(("reached", "reached", "dispatched", "not_reached")))
        recurrences.append([*trials, (draw(st.sampled_from(spec.batch_sizes)), end)])
    order = draw(st.permutations([r for r, trials in enumerate(recurrences) for _ in trials]))
    cursor, history = [0] * len(recurrences), []
    for trial, r in enumerate(order):  # each recurrence's trials stay in their order
        b, status = recurrences[r][cursor[r]]
        cursor[r] += 1
        history.append(record(r, trial, b, status, draw(costs)))
    return history


@st.composite
def driven(draw, spec: JobSpec, policy_name: str) -> list[tuple[list[Trial], int]]:
    """The histories a policy makes running the job, up to 4 recurrences in flight: (history, seed) per decision."""
    policy = get_policy(policy_name)
    limit = draw(st.sampled_from([*ALL_SIZES, 10_000]))  # oom at this size and above
    base = {b: draw(st.floats(min_value=5.0, max_value=50.0)) for b in spec.batch_sizes}
    never = {b for b in spec.batch_sizes if draw(st.integers(0, 4)) == 0}  # sizes that never reach
    history: list[Trial] = []
    decisions, in_flight, recurrence = [], [], 0
    for _ in range(draw(st.integers(1, 24))):
        if in_flight and (len(in_flight) >= 4 or draw(st.booleans())):
            k = in_flight.pop(draw(st.integers(0, len(in_flight) - 1)))
            r = history[k]
            cost = base[r.batch_size] * draw(st.floats(min_value=0.8, max_value=1.4))
            status = draw(st.sampled_from(["reached", "failed"] if r.batch_size not in never else MISSES[:2]))
            status = "oom" if r.batch_size >= limit else status
            history[k] = record(r.recurrence, r.trial, r.batch_size, status, cost)
            continue
        seed = draw(st.integers(0, 2**31 - 1))
        try:
            d = policy.decide(spec, history, seed)
        except NoFeasibleBatchSizeError:
            break
        decisions.append((list(history), seed))
        recurrence += 1
        in_flight.append(len(history))
        history.append(record(recurrence, len(history), d.batch_size, "dispatched"))
    return decisions


def smallest_oom(history: list[Trial]) -> int | None:
    ooms = [r.batch_size for r in history if r.status.value == "oom"]
    return min(ooms) if ooms else None


def check(policy_name: str, spec: JobSpec, history: list[Trial], seed: int) -> None:
    """The properties every decision keeps (see the module docstring of each policy)."""
    policy = get_policy(policy_name)
    limit = smallest_oom(history)
    if limit is not None and limit <= min(spec.batch_sizes):
        with pytest.raises(NoFeasibleBatchSizeError):
            policy.decide(spec, history, seed)
        return
    d = policy.decide(spec, history, seed)
    states = {a.batch_size: a for a in policy.arm_states(spec, history)}
    # (b) an oom at b rules out every size >= b, in the decision and in the reported state.
    if limit is not None:
        assert d.batch_size < limit
        assert all(a.pruned and a.stage == "oom" for b, a in states.items() if b >= limit)
    # (c) every decision is a configured size that arm_states does not report as pruned.
    assert d.batch_size in spec.batch_sizes
    if policy_name == "turning-walk":
        assert not states[d.batch_size].pruned, (d, states[d.batch_size])
        # (a) never exploit a size that never reached the target while another (feasible) size has.
        reached = {r.batch_size for r in history if r.status.value == "reached"}
        reached = {b for b in reached if limit is None or b < limit}
        if d.stage == "exploitation" and reached:
            assert d.batch_size in reached, (d, reached)


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
@FAST
@given(data=st.data())
def test_properties_over_any_interleaving_of_recurrences(policy_name, data):
    spec = data.draw(specs())
    history = data.draw(histories(spec))
    check(policy_name, spec, history, data.draw(st.integers(0, 2**31 - 1)))


@pytest.mark.parametrize("policy_name", POLICY_NAMES)
@settings(FAST, max_examples=40)
@given(data=st.data())
def test_properties_over_histories_the_policy_makes(policy_name, data):
    spec = data.draw(specs())
    for history, seed in data.draw(driven(spec, policy_name)):
        check(policy_name, spec, history, seed)


def _generated_cases(policy_name: str, count: int) -> list[tuple[JobSpec, list[Trial], int]]:
    """A few (spec, history, seed) from a job the policy runs with 3 recurrences in flight (seeded RNG)."""
    rng, policy, cases = random.Random(8), get_policy(policy_name), []
    spec = make_spec()
    base = {b: rng.uniform(5, 50) for b in spec.batch_sizes}
    history: list[Trial] = []
    in_flight: list[int] = []
    while len(cases) < count:
        if len(in_flight) == 3:
            k = in_flight.pop(rng.randrange(3))
            r = history[k]
            status = rng.choice(["reached", "reached", "not_reached", "cost_exceeded", "failed"])
            history[k] = record(r.recurrence, r.trial, r.batch_size, status, base[r.batch_size] * rng.uniform(0.8, 1.3))
        seed = rng.randrange(2**31)
        d = policy.decide(spec, history, seed)
        cases.append((spec, list(history), seed))
        in_flight.append(len(history))
        history.append(record(len(history), len(history), d.batch_size, "dispatched"))
    return cases[:: count // 6 or 1]


SUBPROCESS = """
import json, sys
from zeus_kfp.job import JobSpec, TrialStatus
from zeus_kfp.trials import Trial
from zeus_kfp.policy import get_policy
out = []
for case in json.load(sys.stdin):
    spec = JobSpec.from_dict(case["spec"])
    hist = [Trial(**{**r, "status": TrialStatus(r["status"])}) for r in case["history"]]
    out.append(get_policy(case["policy"]).decide(spec, hist, case["seed"]).__dict__)
print(json.dumps(out))
"""


def test_same_spec_history_and_seed_give_the_same_decision_in_a_new_process():
    cases = [(name, *case) for name in POLICY_NAMES for case in _generated_cases(name, 30)]
    payload = [
        {
            "policy": name,
            "spec": spec.to_dict(),
            "history": [{**dataclasses.asdict(r), "status": r.status.value} for r in history],
            "seed": seed,
        }
        for name, spec, history, seed in cases
    ]
    done = subprocess.run(
        [sys.executable, "-c", SUBPROCESS], input=json.dumps(payload), capture_output=True, text=True, check=True
    )
    here = [get_policy(name).decide(spec, history, seed).__dict__ for name, spec, history, seed in cases]
    assert len(here) >= 10 and json.loads(done.stdout) == here
    assert len({d["batch_size"] for d in here}) > 1  # the cases are not all the same decision
