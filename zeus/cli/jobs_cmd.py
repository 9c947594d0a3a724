"""`zeus-kfp jobs` and `zeus-kfp show`: what the store holds, for people."""
