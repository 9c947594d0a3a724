"""What a cluster trial's pods and the train step hand each other through the store.

Why the store: the train step and the TrainJob/PyTorchJob pods share no disk. Rank 0's node
uploads the files the trial left in its log dir (result.json, profile.parquet, model.pt) and the
train step reads them back; the other way, the step uploads the stored power profile the trial
reuses (reuse_profile.parquet). A profile is the same Parquet bytes here as in the log dir and the KFP
artifacts (PowerProfile.to_parquet). Keys are the store's (zeus_kfp.store.keys.handoff_key): per job,
recurrence, attempt and *run* (one Kubernetes job), so an adopted job keeps its run and a replaced one never
mixes with it.

The pods learn where to write from these variables (set in the job's manifest), and get the
store's keys from the Kubernetes Secret the pipeline already uses (never from a parameter).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zeus_kfp.profiles import PowerProfile
from zeus_kfp.store import open_store
from zeus_kfp.train.artifacts import MODEL_FILE, PROFILE_FILE, RESULT_FILE, REUSE_PROFILE_FILE

STORE_ENV = "ZEUS_KFP_STORE"
# The Secret keys of the store's credentials (those of KFP's own mlpipeline-minio-artifact Secret) and the
# variables zeus_kfp.store reads them from: the pipeline's steps and the trial's pods use the same mapping.
STORE_SECRET_KEY_TO_ENV = {"accesskey": "ZEUS_S3_ACCESS_KEY", "secretkey": "ZEUS_S3_SECRET_KEY"}
STORE_PLAIN_ENV = ("ZEUS_S3_ENDPOINT", "ZEUS_S3_SECURE", "ZEUS_S3_REGION")
ENV = {
    "store_uri": STORE_ENV,
    "job_id": "ZEUS_JOB_ID",
    "recurrence_id": "ZEUS_RECURRENCE_ID",
    "attempt": "ZEUS_ATTEMPT",
    "run": "ZEUS_HANDOFF_RUN",
}
REUSE_ENV = "ZEUS_HANDOFF_REUSE"  # "1": the step uploaded a profile to reuse


@dataclass(frozen=True)
class Handoff:
    """One job run's handover location in the store."""

    store_uri: str
    job_id: str
    recurrence_id: str
    attempt: int
    run: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Handoff | None:
        """The pod's handover, or None outside a cluster trial (ZEUS_HANDOFF_RUN unset)."""
        env = os.environ if environ is None else environ
        if not env.get(ENV["run"]):
            return None
        values = {name: env.get(var, "") for name, var in ENV.items()}
        return cls(**{**values, "attempt": int(values["attempt"] or 0)})  # type: ignore[arg-type]

    def to_env(self) -> dict[str, str]:
        return {var: str(getattr(self, name)) for name, var in ENV.items()}

    def _store(self):
        return open_store(self.store_uri)

    def _put(self, name: str, data: bytes) -> None:
        self._store().put_handoff(self.job_id, self.recurrence_id, self.attempt, self.run, name, data)

    def _get(self, name: str) -> bytes | None:
        return self._store().get_handoff(self.job_id, self.recurrence_id, self.attempt, self.run, name)

    # -- rank 0's node ------------------------------------------------------------------------------
    def publish(self, log_dir: str | os.PathLike[str]) -> list[str]:
        """Upload what the trial left in `log_dir`; result.json last, so whoever finds it finds the rest too."""
        sent = []
        for name in (PROFILE_FILE, MODEL_FILE, RESULT_FILE):
            path = Path(log_dir) / name
            if path.is_file():
                self._put(name, path.read_bytes())
                sent.append(name)
        return sent

    def fetch_reuse(self, dest_dir: str | os.PathLike[str]) -> Path | None:
        """The profile to reuse, written to dest_dir (ZEUS_PROFILE_PATH points the trial at it); None if none."""
        data = self._get(REUSE_PROFILE_FILE)
        if data is None:
            return None
        path = Path(dest_dir) / REUSE_PROFILE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    # -- the train step ---------------------------------------------------------------------------------
    def upload_reuse(self, profile: PowerProfile) -> None:
        self._put(REUSE_PROFILE_FILE, profile.to_parquet())

    def read_result(self) -> bytes | None:
        return self._get(RESULT_FILE)

    def read_profile(self) -> PowerProfile:
        data = self._get(PROFILE_FILE)
        return PowerProfile.empty() if data is None else PowerProfile.read_parquet(data)

    def read_model(self, dest: Path) -> Path | None:
        data = self._get(MODEL_FILE)
        if data is None:
            return None
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        return dest
