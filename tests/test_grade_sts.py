"""CSMBench's STS: all-MiniLM-L6-v2 in numpy against published similarities, batches, truncation, errors."""

import numpy as np
import pytest

from benchmint.grade.sts import StsModel


@pytest.fixture(scope="module")
def model():
    return StsModel()


def test_published_similarities(model):
    # The similarity matrix sentence-transformers' documentation prints for all-MiniLM-L6-v2 on these sentences.
    e = model.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    assert e.shape == (3, 384) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-6)
    sims = e @ e.T
    assert [round(float(sims[0, 1]), 4), round(float(sims[0, 2]), 4), round(float(sims[1, 2]), 4)] == [
        0.6660, 0.1046, 0.1411]


def test_a_batch_equals_one_text_at_a_time(model):
    # Different lengths in one batch: padding must not reach any text's embedding.
    rng = np.random.default_rng(3)
    words = "grain boundary twin lattice fringe precipitate pore phase contrast scale bar".split()
    texts = [" ".join(rng.choice(words, size=n)) for n in (3, 40, 120, 7, 300)] + ["", "Å µm ℃ 10^{-3}"]
    batch = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    np.testing.assert_allclose(batch, alone, atol=1e-5)
    assert model.similarity(texts[:2], texts[:2]) == pytest.approx([1.0, 1.0], abs=1e-5)


def test_truncation_at_256_word_pieces(model):
    head = "the sample shows equiaxed grains " * 60  # far beyond 256 pieces
    assert len(model.token_ids([head])[0]) == 256
    a, b = model.embed([head + "and nothing else", head + "but a completely different ending about cats"])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-6)  # the endings are cut off


def test_errors(model):
    with pytest.raises(TypeError, match="text 1 is int"):
        model.embed(["ok", 5])
    with pytest.raises(ValueError, match="one length"):
        model.similarity(["a"], ["a", "b"])
    assert model.embed([]).shape == (0, 384)


# ------------------------------------------- the two kernels against their numpy reference ----

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra.numpy import arrays  # noqa: E402

from benchmint.grade import sts, sts_ref  # noqa: E402


def _close(ulps: float):
    def compare(ref, comp):
        assert comp.dtype == ref.dtype == np.float32 and comp.shape == ref.shape
        np.testing.assert_allclose(comp, ref, rtol=ulps * 1.2e-7, atol=ulps * 1.2e-7)
    return compare


FLOATS = st.floats(-40, 40, width=32, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(0, 5), st.integers(0, 40)), elements=FLOATS))
def test_gelu_equals_reference(compare_forms, x):
    compare_forms("sts", lambda: sts_ref.gelu(x.copy()), lambda: sts.gelu(x.copy()), _close(4))


def test_gelu_edges_and_errors(compare_forms):
    edges = np.array([0.0, -0.0, 1e-30, -1e-30, 3.4e38, -3.4e38, np.inf, -np.inf, 6.0, -6.0, 0.5], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        # erfc in float64: gelu(-6) is -5.9e-9 where float32's 1 + erf cancels to 0; within the tolerance
        compare_forms("sts", lambda: sts_ref.gelu(edges.copy()), lambda: sts.gelu(edges.copy()), _close(4))
    big = np.random.default_rng(1).standard_normal((16 * 256, 1536)).astype(np.float32)  # one batch's FFN
    compare_forms("sts", lambda: sts_ref.gelu(big.copy()), lambda: sts.gelu(big.copy()), _close(4))
    for bad in (np.zeros(3, np.float64), np.zeros((4, 4), np.float32)[:, ::2], [0.0, 1.0]):
        compare_forms("sts", lambda bad=bad: sts_ref.gelu(bad), lambda bad=bad: sts.gelu(bad), None, calls=None)


def _attention(draw_scores, lengths, heads):
    n, length = len(lengths), max(lengths)
    mask = np.zeros((n, length), np.float32)
    for i, k in enumerate(lengths):
        mask[i, :k] = 1.0
    return draw_scores.reshape(n, heads, length, length), mask


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_softmax_equals_reference(compare_forms, data):
    lengths = data.draw(st.lists(st.integers(1, 12), min_size=1, max_size=4))
    heads = data.draw(st.integers(1, 3))
    size = len(lengths) * heads * max(lengths) ** 2
    flat = data.draw(arrays(np.float32, size, elements=st.floats(-60, 60, width=32)))
    scores, mask = _attention(flat, lengths, heads)
    scale = data.draw(st.sampled_from([1.0, 0.17677669, 2.5]))
    compare_forms("sts", lambda: sts_ref.softmax(scores.copy(), mask, scale),
                  lambda: sts.softmax(scores.copy(), mask, scale), _close(8))


def test_softmax_masks_padding_and_checks_shapes(compare_forms):
    rng = np.random.default_rng(2)
    scores, mask = _attention(rng.standard_normal(16 * 12 * 256 * 256).astype(np.float32) * 8,
                              [256, 200, 3, 1] * 4, 12)
    _, (_, probs) = compare_forms("sts", lambda: sts_ref.softmax(scores.copy(), mask, 0.17677669),
                                  lambda: sts.softmax(scores.copy(), mask, 0.17677669), _close(8))
    assert (probs[2, :, :, 3:] == 0).all() and (probs[3, :, :, 1:] == 0).all()
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, atol=1e-5)
    bad_calls = [(np.zeros((1, 1, 2, 2), np.float32), np.ones((1, 3))),  # mask of another length
                 (np.zeros((1, 2, 2), np.float32), np.ones((1, 2))),  # no head axis
                 (np.zeros((1, 1, 2, 3), np.float32), np.ones((1, 3))),  # not square
                 (np.zeros((1, 1, 2, 2), np.float64), np.ones((1, 2)))]
    for s, m in bad_calls:
        compare_forms("sts", lambda s=s, m=m: sts_ref.softmax(s, m, 1.0), lambda s=s, m=m: sts.softmax(s, m, 1.0),
                      None, calls=None)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_add_norm_equals_reference(compare_forms, data):
    rows, dim = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 40))
    x = data.draw(arrays(np.float32, (rows, dim), elements=FLOATS))
    residual = data.draw(arrays(np.float32, (rows, dim), elements=FLOATS))
    weight = data.draw(arrays(np.float32, dim, elements=st.floats(-3, 3, width=32)))
    bias = data.draw(arrays(np.float32, dim, elements=st.floats(-3, 3, width=32)))
    s = (x + residual).astype(np.float64)
    # A row (nearly) constant is ill-conditioned: the reference's float32 mean is off by ~|mean|·1e-7, which the
    # division by the standard deviation magnifies (see the constant-row test below). Rows spread by at least
    # 1% of their size keep that below the tolerance.
    assume(dim > 1 and (s.std(axis=1) > 1e-2 * (np.abs(s).max(axis=1) + 1)).all())

    def close(ref, comp):
        # float32 sums (reference) against float64 sums (kernel): equal up to rounding of the row's scale
        scale = np.abs(weight).max() + 1
        np.testing.assert_allclose(comp, ref, rtol=1e-5, atol=2e-5 * scale)

    compare_forms("sts", lambda: sts_ref.add_norm(x.copy(), residual, weight, bias, 1e-12),
                  lambda: sts.add_norm(x.copy(), residual, weight, bias, 1e-12), close)


def test_add_norm_of_a_constant_row_is_the_bias(forced_impl):
    x, residual = np.full((1, 18), 1.0139762, np.float32), np.zeros((1, 18), np.float32)
    weight, bias = np.full(18, 2.0, np.float32), np.arange(18, dtype=np.float32)
    with forced_impl("compiled"):
        np.testing.assert_array_equal(sts.add_norm(x.copy(), residual, weight, bias, 1e-12), bias[None, :])


def test_add_norm_of_a_real_layer_and_errors(compare_forms):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 256, 384)).astype(np.float32)
    residual = rng.standard_normal((16, 256, 384)).astype(np.float32) * 3
    weight, bias = rng.random(384, np.float32), rng.standard_normal(384).astype(np.float32)
    compare_forms("sts", lambda: sts_ref.add_norm(x.copy(), residual, weight, bias, 1e-12),
                  lambda: sts.add_norm(x.copy(), residual, weight, bias, 1e-12), _close(16))
    one = np.ones((2, 3), np.float32)
    for args in ((one, np.ones((2, 4), np.float32), one[0], one[0]),  # residual of another shape
                 (one, one, np.ones(2, np.float32), one[0]),  # weight of the wrong length
                 (one.astype(np.float64), one, one[0], one[0])):
        compare_forms("sts", lambda a=args: sts_ref.add_norm(a[0].copy(), *a[1:], 1e-12),
                      lambda a=args: sts.add_norm(a[0].copy(), *a[1:], 1e-12), None, calls=None)


def test_embeddings_of_both_forms_agree_across_threads(forced_impl):
    # More texts than one batch, so batches run on several threads; the reference form runs the same batches.
    rng = np.random.default_rng(5)
    words = "grain boundary twin lattice fringe precipitate pore phase contrast scale bar nm".split()
    texts = [" ".join(rng.choice(words, size=int(k))) for k in rng.integers(1, 300, size=2 * sts.BATCH + 3)]
    with forced_impl("reference"):
        ref = StsModel(workers=1).embed(texts)
    with forced_impl("compiled"):
        comp = StsModel(workers=2).embed(texts)
        again = StsModel(workers=1).embed(texts)
    np.testing.assert_allclose(comp, ref, atol=2e-6)
    np.testing.assert_array_equal(comp, again)  # the thread count does not change a bit
