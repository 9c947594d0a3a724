"""Katib's text filters: the default pattern, user patterns, hostile lines."""

from __future__ import annotations

import pytest

from zeus_kfp.train.metrics import MetricPatternError, compile_patterns, parse_line

KATIB = compile_patterns(None)


def pairs(line: str, patterns=KATIB):
    return list(parse_line(line, patterns))


def test_katib_default_pattern():
    assert pairs("epoch=3 loss = 0.25 accuracy=9.3e-1 lr=-1E-3") == [
        ("epoch", 3.0),
        ("loss", 0.25),
        ("accuracy", 0.93),
        ("lr", -0.001),
    ]
    assert pairs("accuracy=+ accuracy=nan accuracy=1e999 no metrics here") == []
    assert pairs("train-acc=0.5") == [("train-acc", 0.5)]


def test_progress_bar_carriage_returns_and_long_lines():
    assert pairs("10%|#  | accuracy=0.1\r100%|###| accuracy=0.9") == [("accuracy", 0.1), ("accuracy", 0.9)]
    assert pairs("x" * 100_000 + " accuracy=0.9") == []  # capped, never slow


def test_user_patterns_need_two_groups():
    rx = compile_patterns([r"(acc)uracy: ([0-9.]+)"])
    assert pairs("accuracy: 0.7", rx) == [("acc", 0.7)]
    with pytest.raises(MetricPatternError, match="metric_patterns"):
        compile_patterns([r"accuracy: [0-9.]+"])
    with pytest.raises(MetricPatternError, match="metric_patterns"):
        compile_patterns([r"(unclosed"])
