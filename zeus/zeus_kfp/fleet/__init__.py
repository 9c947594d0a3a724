"""The fleet view: what zeus-kfp saved across every job of a store, for the platform team.

figures: per job and in total, from zeus_kfp.report's one saving; read: from a store, with `--job` patterns and a
window; plot: cumulative energy saved, per job stacked; markdown: the table, the KFP report and its Metrics;
exporter: the same as Prometheus metrics. Nothing is imported here: `zeus-kfp --help` loads no pandas.
"""
