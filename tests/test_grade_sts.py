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
    assert len(model._ids([head])[0]) == 256
    a, b = model.embed([head + "and nothing else", head + "but a completely different ending about cats"])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-6)  # the endings are cut off


def test_errors(model):
    with pytest.raises(TypeError, match="text 1 is int"):
        model.embed(["ok", 5])
    with pytest.raises(ValueError, match="one length"):
        model.similarity(["a"], ["a", "b"])
    assert model.embed([]).shape == (0, 384)
