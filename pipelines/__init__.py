"""zeus-kfp's KFP wiring: the recurrence pipeline (dag), its YAML (compile), local runs through
kfp.local (local) and the cluster client (client). For notebooks:

    from zeus_kfp.pipelines import run_local, compile_pipeline
    summaries = run_local(spec, recurrences=2, store="s3://bucket/prefix")
    compile_pipeline("zeus_pipeline.yaml", attempts=5, gpus=1, minio_secret="mlpipeline-minio-artifact")

Names are loaded on first use, so `import zeus_kfp.pipelines.client` does not pay for the others.
"""

from importlib import import_module

_EXPORTS = {
    "build_pipeline": "zeus_kfp.pipelines.dag",
    "ClusterOptions": "zeus_kfp.pipelines.dag",
    "compile_pipeline": "zeus_kfp.pipelines.compile",
    "run_local": "zeus_kfp.pipelines.local",
    "LocalRunError": "zeus_kfp.pipelines.local",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'zeus_kfp.pipelines' has no attribute {name!r}")
