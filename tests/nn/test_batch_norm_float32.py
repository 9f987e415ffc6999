"""BatchNorm2d in training mode on float32, against PyTorch in float64 on the same values: the forward's
per-channel statistics and the backward's sums are einsums (rtxviz.engine.ops.nn_norm._batch_statistics,
BatchNormTrainBackward) whose float32 accumulation must stay as precise as numpy's pairwise mean was; the
inputs have a large mean beside a small spread (the case where a careless variance loses digits)."""

from __future__ import annotations

import numpy as np
import pytest

from rtxviz import Tensor, Variable, nn, no_grad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm2d_float32_training_matches_pytorch_float64(affine: bool) -> None:
    rng = np.random.default_rng(7)
    x = (5.0 + 0.5 * rng.standard_normal((16, 6, 12, 12))).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    ours = nn.BatchNorm2d(6, affine=affine)
    theirs = torch.nn.BatchNorm2d(6, affine=affine).double()
    if affine:
        w = (1.0 + 0.3 * rng.standard_normal(6)).astype(np.float32)
        b = (0.2 * rng.standard_normal(6)).astype(np.float32)
        with no_grad():
            ours.weight.copy_(Tensor(w))
            ours.bias.copy_(Tensor(b))
        with torch.no_grad():
            theirs.weight.copy_(torch.from_numpy(w.astype(np.float64)))
            theirs.bias.copy_(torch.from_numpy(b.astype(np.float64)))
    xv = Variable(x, requires_grad=True)
    out = ours(xv)
    (out * Tensor(dy)).sum().backward()
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    ref = theirs(xt)
    ref.backward(torch.from_numpy(dy.astype(np.float64)))

    assert out.dtype == np.float32 and xv.grad is not None and xv.grad.dtype == np.float32
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=0, atol=2e-5)
    np.testing.assert_allclose(xv.grad.numpy(), xt.grad.numpy(), rtol=0, atol=2e-5 * np.abs(xt.grad.numpy()).max())
    np.testing.assert_allclose(ours.running_mean.numpy(), theirs.running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-5)
    if affine:
        assert ours.weight.grad is not None and ours.bias.grad is not None
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(ours.bias.grad.numpy(), theirs.bias.grad.numpy(), rtol=1e-5, atol=1e-3)
