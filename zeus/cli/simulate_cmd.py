"""`zeus-kfp simulate`: replay the NSDI'23 traces under a policy (filled in by the simulator work)."""
