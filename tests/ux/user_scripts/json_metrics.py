"""A plain script that logs its metrics as JSON lines, one of them cut short (a bug in its own logging)."""

import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, required=True)
parser.add_argument("--metrics", default="metrics.json")
args = parser.parse_args()

with open(args.metrics, "w") as out:
    out.write(json.dumps({"epoch": 1, "val_acc": 0.5}) + "\n")
    out.write('{"epoch": 2, "val_acc": 0.75\n')  # the closing brace is missing
    out.write(json.dumps({"epoch": 3, "val_acc": 0.95}) + "\n")
