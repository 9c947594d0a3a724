"""The object store the tables live in: a small create-only interface, and the local-directory backend.

Why create-only: the store is append-only (DESIGN.md), so the one write primitive is
"create this key if it does not exist" (`put_new`). It is atomic and exclusive on both
backends: here by a hard link from a finished temp file (readers never see half a file, and
two writers of one key cannot both win); on S3 by `If-None-Match: *` (see s3.py). Deletion
exists only for compaction, which removes events it has already merged into a snapshot.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Protocol


class ObjectNotFound(KeyError):
    """The key does not exist (or was removed by compaction between a list and a get)."""


class Backend(Protocol):
    """What the store needs from an object store. Keys are '/'-separated and relative to the root."""

    uri: str
    location: str  # where, for messages: a directory, or endpoint + bucket; never credentials

    def put_new(self, key: str, data: bytes) -> bool:
        """Create `key` with `data` unless it exists. True if this call created it."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; raises ObjectNotFound."""
        ...

    def get_many(self, keys: list[str]) -> dict[str, bytes | None]:
        """Several objects at once (in parallel where it helps); None for a key that is gone."""
        ...

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        """Every key under `prefix` (recursively), sorted, optionally only those after `start_after`."""
        ...

    def list_dirs(self, prefix: str) -> list[str]:
        """The sorted "folders" directly under `prefix` (which ends with '/'), each ending with '/'."""
        ...

    def delete(self, keys: list[str]) -> None:
        """Remove keys; keys already gone are fine."""
        ...

    def conditional_writes_honoured(self) -> bool:
        """Whether `put_new` really is exclusive here (compaction deletes only if it is)."""
        ...


TEMP_MARK = ".tmp-"


def probe_exclusive_create(backend: Backend) -> bool:
    """Ask the storage itself, don't assume: create a scratch key twice; the second must be refused."""
    probe = f"_probe/{uuid.uuid4().hex}"
    try:
        return backend.put_new(probe, b"1") and not backend.put_new(probe, b"2")
    finally:
        backend.delete([probe])


class LocalBackend:
    """A directory on a local or shared file system: zero setup, the embedded default."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.uri = self.root.as_uri()
        self.location = str(self.root)
        self._honoured: bool | None = None

    def _path(self, key: str) -> Path:
        # Keys are built from validated segments (keys.py); this is the last line of defence.
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ValueError(f"key {key!r} leaves the store root {self.root}")
        return path

    def put_new(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            return False
        tmp = path.parent / f"{TEMP_MARK}{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                # link() fails if the target exists: an atomic, exclusive create of a complete file.
                os.link(tmp, path)
            except FileExistsError:
                return False
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc

    def get_many(self, keys: list[str]) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for key in keys:
            try:
                out[key] = self.get(key)
            except ObjectNotFound:
                out[key] = None
        return out

    def list(self, prefix: str, start_after: str | None = None) -> list[str]:
        directory, _, _ = prefix.rpartition("/")
        base = self._path(directory) if directory else self.root
        if not base.is_dir():
            return []
        keys = []
        for dirpath, _dirs, files in os.walk(base):
            rel_dir = Path(dirpath).relative_to(self.root).as_posix()
            for name in files:
                if name.startswith(TEMP_MARK):
                    continue
                key = name if rel_dir == "." else f"{rel_dir}/{name}"
                if key.startswith(prefix) and (start_after is None or key > start_after):
                    keys.append(key)
        keys.sort()
        return keys

    def list_dirs(self, prefix: str) -> list[str]:
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return []
        return sorted(f"{prefix}{entry.name}/" for entry in os.scandir(base) if entry.is_dir())

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def conditional_writes_honoured(self) -> bool:
        # Hard links are exclusive on POSIX file systems, but some network file systems emulate them.
        if self._honoured is None:
            self._honoured = probe_exclusive_create(self)
        return self._honoured
