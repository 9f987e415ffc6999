"""nn ops: values against numpy reference implementations written here (naive loops for conv and pooling) and
PyTorch 2.13 numbers stored below; gradients against central finite differences in float64; second order
(Hessian-vector products) against finite differences of the first-order gradient; dtypes; error messages."""

import numpy as np
import pytest

from rtxviz import DTypeError, ShapeError, Tensor, Variable, grad, manual_seed
from rtxviz.engine.ops.nn import (
    avg_pool2d,
    binary_cross_entropy_with_logits,
    conv2d,
    cross_entropy,
    dropout,
    embedding,
    l1_loss,
    layer_norm,
    log_softmax,
    max_pool2d,
    mse_loss,
    nll_loss,
    softmax,
)
from tests.finite_differences import numeric_grad_of

RNG = np.random.default_rng(1234)


def det(shape, a=0.7, b=0.3, s=3.0):
    """The deterministic inputs the stored PyTorch numbers were computed from."""
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * a + b) * s).reshape(shape)


def v(arr):
    return Variable(np.asarray(arr, dtype=np.float64), requires_grad=True)


def ids(arr):
    return Tensor(np.asarray(arr, dtype=np.int64))


def check_grads(fn, arrays, atol=1e-6, wrt=None):
    """Autograd gradients of sum(fn(*vars) * R) against finite differences, for every input (or `wrt`)."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    probe = fn(*[Tensor(a) for a in arrays])
    r = RNG.standard_normal(probe.shape)

    def scalar(*arrs):
        return float((fn(*[Tensor(a) for a in arrs]).numpy() * r).sum())

    vs = [v(a) for a in arrays]
    out = fn(*vs)
    which = range(len(arrays)) if wrt is None else wrt
    got = grad([out], [vs[i] for i in which], [Tensor(r)])
    for i, g in zip(which, got, strict=True):
        np.testing.assert_allclose(g.numpy(), numeric_grad_of(scalar, arrays, i), atol=atol, rtol=1e-5)


def check_second_order(fn, x, atol=1e-5):
    """d/dx <grad_x L, u> with create_graph against finite differences of the first-order gradient."""
    x = np.asarray(x, dtype=np.float64)
    u = RNG.standard_normal(x.shape)

    def first(arr):
        xv = v(arr)
        return grad([fn(xv)], [xv])[0].numpy()

    xv = v(x)
    (gx,) = grad([fn(xv)], [xv], create_graph=True)
    (hvp,) = grad([(gx * Tensor(u)).sum()], [xv])
    want = numeric_grad_of(lambda a: float((first(a) * u).sum()), [x], 0)
    np.testing.assert_allclose(hvp.numpy(), want, atol=atol, rtol=1e-4)


# -- references ---------------------------------------------------------------------------------------------------
def ref_softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def ref_conv(x, w, b, stride, padding, dilation=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2))
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for ni in range(n):
        for oi in range(o):
            gi = oi // og
            for y in range(ho):
                for z in range(wo):
                    acc = 0.0 if b is None else b[oi]
                    for ci in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                acc += xp[ni, gi * cg + ci, y * stride[0] + i * dilation[0],
                                          z * stride[1] + j * dilation[1]] * w[oi, ci, i, j]
                    out[ni, oi, y, z] = acc
    return out


def ref_pool(x, k, s, p, kind):
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, c, ho, wo))
    for y in range(ho):
        for z in range(wo):
            win = xp[:, :, y * s:y * s + k, z * s:z * s + k]
            out[:, :, y, z] = win.max(axis=(2, 3)) if kind == "max" else win.sum(axis=(2, 3)) / (k * k)
    return out


# -- softmax / log_softmax ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax_values(dim):
    x = RNG.standard_normal((3, 4, 5))
    np.testing.assert_allclose(softmax(Tensor(x), dim).numpy(), ref_softmax(x, dim), rtol=1e-12)
    np.testing.assert_allclose(log_softmax(Tensor(x), dim).numpy(), np.log(ref_softmax(x, dim)), atol=1e-12)
    np.testing.assert_allclose(Tensor(x).softmax(dim).numpy(), ref_softmax(x, dim), rtol=1e-12)


def test_softmax_is_stable_for_huge_logits():
    x = np.array([[1000.0, 1001.0, -1000.0]])
    y = softmax(Tensor(x), -1).numpy()
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y[0, :2], [1 / (1 + np.e), np.e / (1 + np.e)], rtol=1e-12)
    ly = log_softmax(Tensor(x), -1).numpy()
    np.testing.assert_allclose(ly[0, 1], -np.log1p(np.exp(-1.0)), rtol=1e-12)
    assert ly[0, 2] == pytest.approx(-2001.0 - np.log1p(np.exp(-1.0)))


@pytest.mark.parametrize("fn", [softmax, log_softmax])
def test_softmax_grads_first_and_second_order(fn):
    x = RNG.standard_normal((3, 4))
    check_grads(lambda t: fn(t, 1), [x])
    check_grads(lambda t: fn(t, 0), [x])
    w = RNG.standard_normal((3, 4))
    check_second_order(lambda t: (fn(t, 1) * Tensor(w)).sum() * fn(t, 1).sum(), x)
    check_second_order(lambda t: (fn(t, 0) * fn(t, 0) * Tensor(w)).sum(), x)


def test_softmax_float32_stays_float32():
    x = Variable(RNG.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    y = x.log_softmax(-1)
    assert y.dtype == np.float32 and x.softmax(0).dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32


# -- layer_norm ------------------------------------------------------------------------------------------------------
def ref_layer_norm(x, k, w, b, eps):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    out = (x - mu) / np.sqrt(var + eps)
    return out * (1 if w is None else w) + (0 if b is None else b)


def test_layer_norm_values():
    x = RNG.standard_normal((2, 3, 4))
    w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    np.testing.assert_allclose(layer_norm(Tensor(x), (3, 4), Tensor(w), Tensor(b)).numpy(),
                               ref_layer_norm(x, 2, w, b, 1e-5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer_norm(Tensor(x), 4, eps=1e-3).numpy(), ref_layer_norm(x, 1, None, None, 1e-3),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer_norm(Tensor(x), 4, bias=Tensor(b[0])).numpy(),
                               ref_layer_norm(x, 1, None, b[0], 1e-5), rtol=1e-10, atol=1e-12)


def test_layer_norm_grads_and_second_order():
    x = RNG.standard_normal((3, 5))
    w, b = RNG.standard_normal(5), RNG.standard_normal(5)
    check_grads(lambda a, c, d: layer_norm(a, 5, c, d, eps=1e-3), [x, w, b])
    check_grads(lambda a: layer_norm(a, (3, 5)), [x])
    wt = Tensor(w)
    r = RNG.standard_normal((3, 5))
    check_second_order(lambda t: (layer_norm(t, 5, wt, eps=1e-3) ** 2 * Tensor(r)).sum(), x, atol=1e-4)


def test_layer_norm_shape_errors():
    x = Tensor.ones([2, 3])
    with pytest.raises(ShapeError, match=r"layer_norm: normalized_shape \[4\] does not match .*\(2, 3\)"):
        layer_norm(x, 4)
    with pytest.raises(ShapeError, match="layer_norm: weight has shape"):
        layer_norm(x, 3, Tensor.ones([2]))


# -- losses --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1_values_and_grads(reduction):
    a, t = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    red = {"mean": np.mean, "sum": np.sum, "none": lambda z: z}[reduction]
    np.testing.assert_allclose(mse_loss(Tensor(a), Tensor(t), reduction).numpy(), red((a - t) ** 2), rtol=1e-12)
    np.testing.assert_allclose(l1_loss(Tensor(a), Tensor(t), reduction).numpy(), red(np.abs(a - t)), rtol=1e-12)
    check_grads(lambda x, y: mse_loss(x, y, reduction), [a, t])
    check_grads(lambda x, y: l1_loss(x, y, reduction), [a, t])


def test_mse_second_order_is_two_over_n():
    x = RNG.standard_normal(4)
    xv = v(x)
    (g,) = grad([mse_loss(xv, Tensor(np.zeros(4)))], [xv], create_graph=True)
    (h,) = grad([(g * Tensor(np.eye(4)[1])).sum()], [xv])
    np.testing.assert_allclose(h.numpy(), [0, 0.5, 0, 0])  # d²/dx² mean(x²) = 2/4 on the diagonal


def test_bce_with_logits_matches_pytorch():
    x, y = det((2, 3), s=4.0), np.array([[1.0, 0, 0.5], [0, 1, 1]])
    pw = np.array([2.0, 0.5, 1.5])
    xv, yv = v(x), v(y)
    loss = binary_cross_entropy_with_logits(xv, yv, pos_weight=Tensor(pw))
    assert loss.item() == pytest.approx(2.135106697506, rel=1e-10)
    gx, gy = grad([loss], [xv, yv])
    np.testing.assert_allclose(gx.numpy().ravel(), [-0.078226088118, 0.161103523737, 0.079461529155,
                                                    0.156189313394, -0.038209577312, -0.23009335576], atol=1e-11)
    np.testing.assert_allclose(gy.numpy().ravel(), [-0.152436977091, -0.563809710441, -0.659546579904,
                                                    -0.439487621891, -0.078840423314, 0.618772540666], atol=1e-11)
    big = binary_cross_entropy_with_logits(Tensor(np.array([[50.0, -60.0, 0.1]])),
                                           Tensor(np.array([[0.0, 1.0, 1.0]])), "sum")
    assert big.item() == pytest.approx(110.644396660074, rel=1e-12)
    check_grads(lambda a, b: binary_cross_entropy_with_logits(a, b, "none"), [x, y])


def ref_cross_entropy(z, t, eps=0.0, ignore=-100):
    logp = np.log(ref_softmax(z, 1))
    c = z.shape[1]
    keep = t != ignore
    tc = np.where(keep, t, 0)
    picked = np.take_along_axis(logp, tc[:, None], 1)[:, 0]
    loss = -(1 - eps) * picked - eps / c * logp.sum(axis=1)
    return (loss * keep).sum() / keep.sum()


def test_cross_entropy_values_and_grads():
    z, t = RNG.standard_normal((5, 4)), np.array([0, 3, 1, 1, 2])
    assert cross_entropy(Tensor(z), ids(t)).item() == pytest.approx(ref_cross_entropy(z, t), rel=1e-12)
    assert cross_entropy(Tensor(z), ids(t), "sum").item() == pytest.approx(5 * ref_cross_entropy(z, t), rel=1e-12)
    none = cross_entropy(Tensor(z), ids(t), "none").numpy()
    np.testing.assert_allclose(none, -np.log(ref_softmax(z, 1))[np.arange(5), t], rtol=1e-12)
    for red in ("mean", "sum", "none"):
        check_grads(lambda a, red=red: cross_entropy(a, ids(t), red), [z])
    check_grads(lambda a: cross_entropy(a, ids([0, -100, 1, 1, 2]), label_smoothing=0.3), [z])
    # closed form: softmax - onehot, over N
    zv = v(z)
    cross_entropy(zv, ids(t)).backward()
    np.testing.assert_allclose(zv.grad.numpy(), (ref_softmax(z, 1) - np.eye(4)[t]) / 5, atol=1e-14)


def test_cross_entropy_ignore_index_and_label_smoothing_match_pytorch():
    z = v(det((4, 5)))
    loss = cross_entropy(z, ids([1, -100, 4, 0]), label_smoothing=0.2)
    assert loss.item() == pytest.approx(3.88502811378, rel=1e-10)
    assert loss.item() == pytest.approx(ref_cross_entropy(det((4, 5)), np.array([1, -100, 4, 0]), 0.2), rel=1e-12)
    loss.backward()
    np.testing.assert_allclose(z.grad.numpy().ravel(), [
        0.005383350613, -0.183719322451, 0.137752653974, 0.045179390815, -0.004596072952, 0, 0, 0, 0, 0,
        0.091395051801, 0.145544421396, 0.04634493972, -0.004536545773, -0.278747867144, -0.27892202467,
        -0.01185408104, -0.006352240783, 0.041282104909, 0.255846241584], atol=1e-11)


def test_cross_entropy_spatial_matches_pytorch():
    z = v(det((2, 3, 2, 2)))
    t = ids([[[0, 2], [1, 1]], [[2, 0], [1, 2]]])
    loss = cross_entropy(z, t, reduction="sum")
    assert loss.item() == pytest.approx(21.875877406511, rel=1e-11)
    loss.backward()
    np.testing.assert_allclose(z.grad.numpy().ravel()[:6], [-0.375409113971, 0.821863386762, 0.603373187347,
                                                            0.279829212058, 0.29156944782, 0.010502229394],
                               atol=1e-11)
    check_grads(lambda a: cross_entropy(a, t, "none"), [det((2, 3, 2, 2))])


def test_cross_entropy_second_order():
    z, t = RNG.standard_normal((3, 4)), ids([2, 0, 3])
    check_second_order(lambda a: cross_entropy(a, t), z)
    check_second_order(lambda a: cross_entropy(a * a, t, label_smoothing=0.1), z)
    # closed form Hessian of mean CE for one row: (diag(p) - p pᵀ)
    zv = v(z[:1])
    (g,) = grad([cross_entropy(zv, ids([1]))], [zv], create_graph=True)
    p = ref_softmax(z[:1], 1)[0]
    rows = [grad([(g * Tensor(np.eye(4)[i][None])).sum()], [zv], retain_graph=True)[0].numpy()[0] for i in range(4)]
    np.testing.assert_allclose(np.array(rows), np.diag(p) - np.outer(p, p), atol=1e-12)


def test_nll_loss_matches_gather_of_log_probs():
    lp = np.log(ref_softmax(RNG.standard_normal((4, 3)), 1))
    t = np.array([2, 0, 0, 1])
    assert nll_loss(Tensor(lp), ids(t)).item() == pytest.approx(-lp[np.arange(4), t].mean(), rel=1e-12)
    check_grads(lambda a: nll_loss(a, ids(t), "sum"), [lp])
    z = v(RNG.standard_normal((4, 3)))
    a, b = nll_loss(log_softmax(z, 1), ids(t)), cross_entropy(z, ids(t))
    assert a.item() == pytest.approx(b.item(), rel=1e-12)


def test_cross_entropy_errors_name_the_problem():
    z = Tensor.zeros([3, 4])
    with pytest.raises(ShapeError, match=r"cross_entropy: target contains class index 7 at position 1.*4 classes"):
        cross_entropy(z, ids([0, 7, 1]))
    with pytest.raises(DTypeError, match="cross_entropy: target must have dtype int64.*float32"):
        cross_entropy(z, Tensor.zeros([3]))
    with pytest.raises(ShapeError, match=r"cross_entropy: target has shape \(2,\).*\(3,\)"):
        cross_entropy(z, ids([0, 1]))
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy(z, ids([0, 1, 2]), reduction="avg")
    with pytest.raises(ShapeError, match="mse_loss: input shape"):
        mse_loss(Tensor.zeros([3]), Tensor.zeros([4]))


def test_losses_keep_float32():
    z = Variable(RNG.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    loss = cross_entropy(z, ids([0, 1, 2, 0])) + mse_loss(z, Tensor.zeros([4, 3]))
    assert loss.dtype == np.float32
    loss.backward()
    assert z.grad.dtype == np.float32


# -- embedding -------------------------------------------------------------------------------------------------------
def test_embedding_gathers_and_accumulates_repeated_ids():
    w = RNG.standard_normal((5, 3))
    idx = np.array([[1, 4, 1], [0, 1, 2]])
    np.testing.assert_allclose(embedding(ids(idx), Tensor(w)).numpy(), w[idx])
    wv = v(w)
    out = embedding(ids(idx), wv)
    g = RNG.standard_normal(out.shape)
    out.backward(Tensor(g))
    want = np.zeros_like(w)
    for pos, i in np.ndenumerate(idx):
        want[i] += g[pos]
    np.testing.assert_allclose(wv.grad.numpy(), want, atol=1e-14)
    check_grads(lambda a: embedding(ids(idx), a) ** 2, [w])
    check_second_order(lambda a: (embedding(ids(idx), a) ** 3).sum(), w)


def test_embedding_errors():
    with pytest.raises(ShapeError, match=r"embedding: index 5 .* 5 rows"):
        embedding(ids([0, 5]), Tensor.zeros([5, 2]))
    with pytest.raises(DTypeError, match="embedding: indices must have dtype int64"):
        embedding(Tensor.zeros([2]), Tensor.zeros([5, 2]))


# -- conv2d ----------------------------------------------------------------------------------------------------------
CONV_CASES = [  # x shape, w shape, stride, padding, dilation, groups, bias
    ((2, 3, 6, 5), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, True),
    ((1, 2, 7, 7), (3, 2, 3, 2), (2, 3), (1, 0), (1, 1), 1, True),
    ((2, 4, 7, 6), (4, 2, 2, 3), (1, 1), (2, 1), (2, 1), 2, False),
    ((1, 2, 6, 6), (2, 1, 3, 3), (2, 2), (1, 1), (2, 2), 2, True),
    ((1, 1, 4, 4), (2, 1, 1, 1), (1, 1), (0, 0), (1, 1), 1, False),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_naive_loops_and_finite_differences(case):
    xs, ws, stride, padding, dilation, groups, has_b = case
    x, w = RNG.standard_normal(xs), RNG.standard_normal(ws)
    b = RNG.standard_normal(ws[0]) if has_b else None
    got = conv2d(Tensor(x), Tensor(w), None if b is None else Tensor(b), stride, padding, dilation, groups)
    np.testing.assert_allclose(got.numpy(), ref_conv(x, w, b, stride, padding, dilation, groups), atol=1e-12)
    if has_b:
        check_grads(lambda a, c, d: conv2d(a, c, d, stride, padding, dilation, groups), [x, w, b])
    else:
        check_grads(lambda a, c: conv2d(a, c, None, stride, padding, dilation, groups), [x, w])


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_second_order(stride):
    x, w = RNG.standard_normal((1, 2, 4, 4)), RNG.standard_normal((2, 2, 2, 2))
    wt, xt = Tensor(w), Tensor(x)
    check_second_order(lambda a: (conv2d(a, wt, stride=stride, padding=1) ** 3).sum(), x, atol=1e-4)
    check_second_order(lambda a: (conv2d(xt, a, stride=stride, padding=1) ** 3).sum(), w, atol=1e-4)
    # mixed: d/dw of <grad_x, u> where both grads flow through conv2d_grad_input / conv2d_grad_weight
    xv, wv = v(x), v(w)
    (gx,) = grad([(conv2d(xv, wv, stride=stride, padding=1) ** 2).sum()], [xv], create_graph=True)
    u = RNG.standard_normal(x.shape)
    (gw,) = grad([(gx * Tensor(u)).sum()], [wv])

    def first_x(warr):
        xv2 = v(x)
        return float((grad([(conv2d(xv2, Tensor(warr), stride=stride, padding=1) ** 2).sum()], [xv2])[0].numpy()
                      * u).sum())

    np.testing.assert_allclose(gw.numpy(), numeric_grad_of(first_x, [w], 0), atol=1e-5)


def test_conv2d_float32_and_methods():
    x = Variable(RNG.standard_normal((2, 3, 5, 5)).astype(np.float32), requires_grad=True)
    w = Variable(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    y = x.conv2d(w, padding=1)
    assert y.dtype == np.float32 and y.shape == (2, 4, 5, 5)
    y.sum().backward()
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float32


def test_conv2d_errors_name_shapes():
    x = Tensor.zeros([2, 3, 8, 8])
    with pytest.raises(ShapeError, match=r"conv2d: input has 3 channels but weight expects 4 \(input \(2, 3, 8, 8\), "
                                         r"weight \(5, 4, 3, 3\)"):
        conv2d(x, Tensor.zeros([5, 4, 3, 3]))
    with pytest.raises(ShapeError, match=r"conv2d: kernel \(9, 9\) is larger than the padded input \(8, 8\)"):
        conv2d(x, Tensor.zeros([1, 3, 9, 9]))
    with pytest.raises(ShapeError, match=r"conv2d: bias must have shape \(5,\)"):
        conv2d(x, Tensor.zeros([5, 3, 3, 3]), Tensor.zeros([3]))
    with pytest.raises(ShapeError, match="conv2d: input must be"):
        conv2d(Tensor.zeros([8, 8]), Tensor.zeros([5, 3, 3, 3]))


# -- pooling ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k,s,p,shape", [(2, 2, 0, (2, 2, 4, 4)), (2, 2, 0, (1, 2, 5, 5)), (3, 1, 1, (1, 2, 4, 5)),
                                         (3, 2, 1, (2, 1, 5, 6))])
def test_pooling_matches_naive_loops_and_finite_differences(k, s, p, shape):
    x = RNG.permutation(np.prod(shape)).reshape(shape) * 0.1 + RNG.uniform(0, 0.01, shape)  # no ties
    np.testing.assert_allclose(max_pool2d(Tensor(x), k, s, p).numpy(), ref_pool(x, k, s, p, "max"))
    np.testing.assert_allclose(avg_pool2d(Tensor(x), k, s, p).numpy(), ref_pool(x, k, s, p, "avg"), atol=1e-12)
    check_grads(lambda a: max_pool2d(a, k, s, p), [x], atol=1e-5)
    check_grads(lambda a: avg_pool2d(a, k, s, p), [x])


def test_pooling_with_padding_matches_pytorch():
    x = Tensor(det((1, 2, 4, 5)))
    np.testing.assert_allclose(avg_pool2d(x, 3, stride=2, padding=1).numpy().ravel(), [
        -0.150798939046, 0.091245845865, 0.218236180556, -0.535327182037, -0.487988517948, 0.174668576413,
        0.142459002159, 0.296207584196, 0.07645970261, -0.182896094393, 0.479150639831, 0.537022872564], atol=1e-11)
    got = max_pool2d(x, 3, stride=1, padding=1).numpy().ravel()
    np.testing.assert_allclose(got[:8], [2.524412954424, 2.974994431357, 2.974994431357, 2.974994431357,
                                         2.026389541653, 2.96807473987, 2.974994431357, 2.974994431357], atol=1e-11)


def test_max_pool_ties_route_to_the_first_maximum():
    x = v(np.ones((1, 1, 2, 2)))
    max_pool2d(x, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1, 0], [0, 0]])


def test_pooling_second_order():
    x = RNG.permutation(36).reshape(1, 1, 6, 6) * 0.1
    check_second_order(lambda a: (max_pool2d(a, 3, 1) ** 3).sum(), x, atol=1e-4)
    check_second_order(lambda a: (avg_pool2d(a, 2, 1, 1) ** 3).sum(), x, atol=1e-4)


def test_pooling_errors():
    with pytest.raises(ShapeError, match=r"max_pool2d: kernel \(5, 5\) is larger than the padded input"):
        max_pool2d(Tensor.zeros([1, 1, 4, 4]), 5)
    with pytest.raises(ShapeError, match="avg_pool2d: input must be"):
        avg_pool2d(Tensor.zeros([4, 4]), 2)


# -- dropout ---------------------------------------------------------------------------------------------------------
def test_dropout_is_seeded_scaled_and_masks_the_gradient():
    x = Variable(np.ones((200, 50), dtype=np.float32), requires_grad=True)
    manual_seed(7)
    y = dropout(x, 0.25)
    manual_seed(7)
    y2 = dropout(x, 0.25)
    np.testing.assert_array_equal(y.numpy(), y2.numpy())
    vals = np.unique(y.numpy())
    np.testing.assert_allclose(vals, [0.0, 1 / 0.75], rtol=1e-6)
    assert y.dtype == np.float32
    assert abs((y.numpy() == 0).mean() - 0.25) < 0.02
    y.backward(Tensor(np.full((200, 50), 2.0, dtype=np.float32)))
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * y.numpy(), rtol=1e-6)


def test_dropout_identity_and_edge_cases():
    x = Tensor.ones([3])
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    assert dropout(x, 1.0).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="dropout: probability"):
        dropout(x, 1.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (8, 1), (3, 7, 5), (1000, 3)])
def test_mse_loss_mean_is_numpy_mean_bit_for_bit(dtype, shape) -> None:
    """The mean reduction divides the sum by the count itself (no numpy mean() wrapper): numpy's own mean of
    the squared differences, to the last bit."""
    rng = np.random.default_rng(7)
    x, t = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    ours = mse_loss(Tensor(x), Tensor(t)).numpy()
    expected = ((x - t) ** 2).mean()
    assert ours.dtype == dtype and ours.tobytes() == np.asarray(expected, dtype=dtype).tobytes()
