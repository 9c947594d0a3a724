"""`zeus-kfp run` and `zeus-kfp compile`: the pipeline locally through kfp.local, and its YAML."""
