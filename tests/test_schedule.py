"""Checkpoint and learning-rate schedules."""
import math

import pytest

from geoanatomy.schedule import checkpoint_steps, lr_at


def test_checkpoint_steps_dense_early_then_uniform():
    s = checkpoint_steps(1000, 10, 0.1, 9)
    assert s == [0, 1, 2, 3, 5, 8, 13, 22, 36, 60, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    gaps = [b - a for a, b in zip(s, s[1:])]
    assert gaps[:5] == sorted(gaps[:5])                  # spacing grows in the log part


def test_paper_like_schedule_count():
    assert 206 <= len(checkpoint_steps(20000, 60, 0.1, 200)) <= 256


def test_bad_steps():
    with pytest.raises(ValueError):
        checkpoint_steps(0, 5, 0.1, 5)


def test_lr_warmup_and_cosine():
    lr = 1e-3
    assert lr_at(0, lr, 10, 110, 0.1) == pytest.approx(1e-4)
    assert lr_at(9, lr, 10, 110, 0.1) == pytest.approx(1e-3)
    assert lr_at(60, lr, 10, 110, 0.1) == pytest.approx(1e-4 + 0.9e-3 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr_at(110, lr, 10, 110, 0.1) == pytest.approx(1e-4)
