"""Task generators: answers by independent arithmetic, split disjointness, masks, grading."""
import numpy as np
import pytest

from geoanatomy.tasks import (DEFAULT_LEVELS, LEVELS, SEP, TASKS, TOK, VOCAB, TaskData,
                              level_hardness, make_task, marginal_logprob)


def decode(row):
    return [VOCAB[i] for i in row]


def expected_answer(task, params, toks):
    """Independent reference: parse the token strings and compute with Python ints."""
    prompt = toks[1:toks.index("=")]
    s = "".join(prompt)
    if task == "copy":
        return list(s)
    if task == "rev":
        return list(s[::-1])
    if task == "sort":
        return sorted(s)
    if task == "par":
        return [str(s.count("1") % 2)]
    if task == "cmp":
        a, b = s.split(",")
        return ["<" if int(a) < int(b) else ">" if int(a) > int(b) else "EQ"]
    if task == "add":
        a, b = s.split("+")
        return list(str(int(a) + int(b)).zfill(len(a) + 1))
    if task == "mod":
        a, b = s.split("+")
        m = params["modulus"]
        assert int(a) < m and int(b) < m
        return list(str((int(a) + int(b)) % m).zfill(len(str(m - 1))))
    if task == "mul":
        a, b = s.split("*")
        return list(str(int(a) * int(b)).zfill(len(a) + len(b)))
    raise AssertionError(task)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("level", LEVELS)
def test_answers_match_independent_arithmetic(task, level):
    spec = make_task(task, level)
    data = TaskData(spec, seed=3, n_heldout=64)
    for seqs in (data.heldout, data.train_batch(5, 64)):
        assert seqs.shape[1] == spec.seq_len
        for row in seqs:
            toks = decode(row)
            assert toks[0] == task.upper()
            n_ans = spec.n_answer
            assert toks[-n_ans - 1] == "="
            assert toks[-n_ans:] == expected_answer(task, spec.params, toks), toks


@pytest.mark.parametrize("task", TASKS)
def test_heldout_never_in_training(task):
    spec = make_task(task, "L1")
    data = TaskData(spec, seed=0, n_heldout=1024)
    held = {tuple(r) for r in data.heldout_inputs}
    assert len(held) == data.n_heldout
    for step in range(0, 400, 7):
        x = data.train_inputs(step, 64)
        assert not any(tuple(r) in held for r in x)


def test_batches_depend_only_on_seed_and_step():
    spec = make_task("add", "L2")
    a, b = TaskData(spec, 1), TaskData(spec, 1)
    assert np.array_equal(a.train_batch(17, 32), b.train_batch(17, 32))
    assert not np.array_equal(a.train_batch(17, 32), a.train_batch(18, 32))
    assert not np.array_equal(TaskData(spec, 2).heldout, a.heldout)


def test_answer_positions_point_after_separator():
    for task in TASKS:
        spec = make_task(task, "L2")
        seq = TaskData(spec, 0, 8).heldout[0]
        x = seq[:-1]
        pos = spec.answer_pred_positions()
        assert x[spec.first_answer_pred_pos] == SEP
        assert pos[0] == spec.first_answer_pred_pos and len(pos) == spec.n_answer
        assert np.array_equal(seq[pos + 1], seq[-spec.n_answer:])


def test_levels_are_graded():
    for task in TASKS:
        h = [level_hardness(task, DEFAULT_LEVELS[task][lv]) for lv in LEVELS]
        assert h[0] < h[1] < h[2]
        assert make_task(task, "L1").space_log10 < make_task(task, "L3").space_log10


def test_small_space_caps_heldout():
    data = TaskData(make_task("mul", "L1"), 0, n_heldout=1024, heldout_frac=0.25)
    assert data.n_heldout == 250           # 25% of the 1000 inputs (2-digit x 1-digit)
    with pytest.raises(ValueError, match="exceeds the held-out set"):
        data.eval_set(300)


def test_marginal_logprob_closed_form():
    ans = np.array([[0, 1], [0, 2], [1, 3], [1, 4]])
    # position 0: two tokens at 1/2 -> -log 2; position 1: four at 1/4 -> -log 4
    assert marginal_logprob(ans) == pytest.approx(-(np.log(2) + np.log(4)) / 2)


def test_unknown_task_and_level():
    with pytest.raises(ValueError, match="unknown task"):
        make_task("div", "L1")
    with pytest.raises(ValueError, match="unknown level"):
        make_task("add", "L4")
    assert len(VOCAB) == 32 and TOK["="] == SEP
