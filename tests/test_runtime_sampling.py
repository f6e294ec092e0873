"""Sampling: top-k / top-p filters against hand-computed cases, greedy, seeded reproducibility."""

import numpy as np
import pytest

from rnnx.runtime.sampling import SamplingOptions, row_generators, sample, softmax, top_k_filter, top_p_filter

NEG = -np.inf


def test_top_k_keeps_the_k_largest():
    logits = np.array([[1.0, 4.0, 2.0, 3.0], [0.0, -1.0, 5.0, 5.0]])
    out = top_k_filter(logits, 2)
    np.testing.assert_array_equal(out, [[NEG, 4.0, NEG, 3.0], [NEG, NEG, 5.0, 5.0]])
    np.testing.assert_array_equal(top_k_filter(logits, 4), logits)


def test_top_p_hand_computed_nucleus():
    probs = np.array([[0.5, 0.2, 0.2, 0.1], [0.05, 0.9, 0.03, 0.02]])
    logits = np.log(probs)
    # row 0: sorted 0.5, 0.2, 0.2, 0.1 -> mass before each 0, .5, .7, .9; p=0.6 keeps tokens 0 and one 0.2 tie
    out = top_p_filter(logits, 0.6)
    assert np.isfinite(out[0]).tolist() == [True, True, False, False]
    # row 1: the top token (0.9) alone covers 0.6
    assert np.isfinite(out[1]).tolist() == [False, True, False, False]
    out = top_p_filter(logits, 0.75)
    assert np.isfinite(out[0]).tolist() == [True, True, True, False]
    np.testing.assert_allclose(softmax(out)[0], [0.5 / 0.9, 0.2 / 0.9, 0.2 / 0.9, 0.0])


def test_greedy_and_filters_restrict_samples():
    logits = np.log(np.array([[0.1, 0.6, 0.3], [0.3, 0.3, 0.4]]))
    assert sample(logits, row_generators(0, 2), temperature=0).tolist() == [1, 2]
    draws = np.array([sample(logits, row_generators(s, 2), top_k=1) for s in range(20)])
    assert (draws == [1, 2]).all()
    draws = np.array([sample(logits, row_generators(s, 2), top_k=2) for s in range(200)])
    assert set(draws[:, 0]) == {1, 2}
    assert set(draws[:, 1]) == {0, 1, 2}  # 0.3 ties with the 2nd largest: ties at the k-th value are kept


def test_sampling_frequencies_follow_probabilities():
    logits = np.log(np.array([[0.2, 0.5, 0.3]]))
    rngs = row_generators(123, 1)
    counts = np.bincount([sample(logits, rngs)[0] for _ in range(4000)], minlength=3) / 4000
    np.testing.assert_allclose(counts, [0.2, 0.5, 0.3], atol=0.03)


def test_seeded_reproducibility_and_row_independence():
    logits = np.random.default_rng(0).normal(size=(3, 50))
    a = [sample(logits, g, temperature=0.8, top_p=0.9) for g in [row_generators(7, 3)] * 10]
    b = [sample(logits, g, temperature=0.8, top_p=0.9) for g in [row_generators(7, 3)] * 10]
    assert np.array_equal(a, b)
    c = [sample(logits, g, temperature=0.8, top_p=0.9) for g in [row_generators(8, 3)] * 10]
    assert not np.array_equal(a, c)
    # row 0's draws do not depend on the other rows
    alone = [sample(logits[:1], g, temperature=0.8, top_p=0.9) for g in [row_generators(7, 1)] * 10]
    assert [x[0] for x in a] == [x[0] for x in alone]


@pytest.mark.parametrize(
    "kwargs", [{"temperature": -1}, {"top_k": 1.5}, {"top_k": True}, {"top_p": -0.1}, {"top_p": 1.5}, {"top_p": np.nan}]
)
def test_bad_options(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        sample(np.zeros((1, 3)), row_generators(0, 1), **kwargs)


@pytest.mark.parametrize("top_k", [None, 0, -1])
@pytest.mark.parametrize("top_p", [None, 0, 0.0, 1, 1.0])
def test_every_off_form_is_no_filter(top_k, top_p):
    """docs/sampling.md: top_k None / <= 0 and top_p None / 0 / 1 are "off", stored as None and drawn alike."""
    options = SamplingOptions(1.0, top_k, top_p, 3)
    assert (options.top_k, options.top_p) == (None, None)
    assert SamplingOptions.from_request(1.0, top_k, top_p, 3) == options
    with pytest.raises(ValueError, match="top_p"):  # the Triton wire: a top_p above 1 is refused, as everywhere
        SamplingOptions.from_request(1.0, top_k, 1.5, 3)
    logits = np.random.default_rng(0).normal(size=(2, 9))
    assert np.array_equal(sample(logits, row_generators(3, 2), 1.0, top_k, top_p), sample(logits, row_generators(3, 2)))
