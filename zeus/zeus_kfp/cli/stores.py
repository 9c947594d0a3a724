"""Opening the store from the command line, with the checks a person needs before anything runs.

Why here and not in zeus_kfp.store: the store treats a missing directory as an empty store (a step
creates it on first write), which is right for the pipeline but wrong for a person who mistyped
`--store`: `jobs` would say "no jobs" and `show` would raise from deep inside. So the commands
check a local store's path first: a reader needs an existing directory, a writer a directory it
may write (or a path it may create). S3 stores report their own errors (zeus_kfp.store.errors).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from zeus_kfp.errors import FieldError


class StoreNotWritableError(RuntimeError):
    """This process may not write the local store directory (an environment problem: exit 1)."""


def local_path(uri: str) -> Path | None:
    """The directory of a local store's resolved URI (file://...), None for any other store."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None


# A local path that starts like a mistyped URI: "s3//bucket/x", "s3:/bucket", "s3:bucket", "file:/x".
MISTYPED_URI = re.compile(r"^(?P<scheme>s3|file|https?|gs|minio)(?::/?(?!/)|//)(?P<rest>.*)$", re.IGNORECASE)


def check_store_uri(uri: str | None) -> None:
    """Refuse a store that is a mistyped URI rather than let it become a local directory named after it."""
    typo = MISTYPED_URI.match(uri.strip()) if isinstance(uri, str) else None
    if typo:
        meant = f"{typo['scheme'].lower()}://{typo['rest'].lstrip('/')}"
        raise FieldError("store", uri, f"a directory, file:///path or s3://bucket/prefix (did you mean {meant}?)")


def open_for_reading(uri: str | None):
    """The store at `uri` (None: $ZEUS_KFP_STORE or ./.zeus-kfp/store), which must exist if local. Opened
    read-only: a command that only reads never creates anything, not even a bucket."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.store import open_store

    check_store_uri(uri)
    store = open_store(uri, read_only=True)
    path = local_path(store.uri)
    if path is not None and not path.exists():
        raise FieldError(
            "store",
            uri or str(path),
            f"an existing store directory ({path} does not exist; `zeus-kfp run --store PATH` creates one)",
        )
    return store


def open_for_writing(uri: str | None):
    """The store at `uri`, checked writable if local: created if missing, probed with a temporary file."""
    # deferred: loads pandas and pyarrow (about 1 s), which `zeus-kfp --help` must not pay for
    from zeus_kfp.store import open_store

    check_store_uri(uri)
    store = open_store(uri)
    path = local_path(store.uri)
    if path is None:
        return store
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".zeus-kfp-write-check-"):
            pass
    except OSError as err:
        raise StoreNotWritableError(
            f"cannot write the store directory {path} ({err.strerror}): check its owner, mode and attributes"
        ) from None
    return store
