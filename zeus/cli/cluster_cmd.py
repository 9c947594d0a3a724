"""`zeus-kfp upload|submit|schedule`: the compiled pipeline on a Kubeflow cluster through kfp.Client."""
