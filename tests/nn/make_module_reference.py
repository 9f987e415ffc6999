"""Generate tests/nn/data/module_reference.json with PyTorch (run by hand, never by the tests):

    /tmp/torchvenv/bin/python tests/nn/make_module_reference.py

The cases are declared here once, as plain data and builder functions taking an `nn` namespace, so that the
tests (tests/nn/test_modules_reference.py) build the very same modules with rtxviz.nn; importing this file
does not import torch. For every module case, in float64:

- PyTorch's state-dict keys of a fresh module (the tests compare ours to them),
- a state dict with every parameter drawn at random (loaded into our module, so loading is tested too),
- `steps` forward passes in training mode (BatchNorm's running statistics move), the last one's output, and
  the gradients of its inputs and parameters for the weighted sum Σ out·out_weight,
- the state after those steps (running_mean, running_var, num_batches_tracked), and the eval-mode output.

Functional cases record a call of torch.nn.functional, its output and input gradients; structure cases record
named_modules / named_parameters / state-dict keys of nested models; the model case trains a BatchNorm
ResNet-style block in PyTorch for a few SGD steps and stores its real state dict and its eval output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).parent / "data" / "module_reference.json"


def inp(*shape: int, kind: str = "normal", grad: bool = True, high: int = 0, scale: float = 1.0) -> dict:
    """An input's declaration: kind normal (× scale), int (in [0, high)), sign (±1), prob (in (0.05, 0.95)),
    simplex (rows summing to 1 over dim 1), logsimplex (its log), pos (> 0.1)."""
    return {"shape": list(shape), "kind": kind, "grad": grad and kind in ("normal", "prob", "simplex",
                                                                          "logsimplex", "pos"),
            "high": high, "scale": scale}


def case(name: str, module: str, args: list, kwargs: dict | None = None, inputs: list | None = None,
         steps: int = 1) -> dict:
    return {"name": name, "module": module, "args": args, "kwargs": kwargs or {}, "inputs": inputs or [],
            "steps": steps}


X = inp(3, 7, scale=2.0)  # activations' input
MODULE_CASES: list[dict] = [
    # -- normalisation: running statistics over several training steps, then eval --------------------------------
    case("batchnorm1d_2d", "BatchNorm1d", [5], inputs=[inp(6, 5)], steps=3),
    case("batchnorm1d_3d_cumulative", "BatchNorm1d", [3], {"momentum": None}, [inp(4, 3, 6)], steps=3),
    case("batchnorm2d", "BatchNorm2d", [3], inputs=[inp(4, 3, 5, 5)], steps=3),
    case("batchnorm2d_noaffine_momentum", "BatchNorm2d", [3], {"affine": False, "momentum": 0.3, "eps": 1e-3},
         [inp(2, 3, 4, 4)], steps=2),
    case("batchnorm2d_untracked", "BatchNorm2d", [2], {"track_running_stats": False}, [inp(3, 2, 3, 3)], steps=2),
    case("groupnorm", "GroupNorm", [2, 6], inputs=[inp(3, 6, 4, 4)]),
    case("groupnorm_noaffine_1d", "GroupNorm", [3, 6], {"affine": False, "eps": 1e-4}, [inp(2, 6, 5)]),
    case("layernorm_2dims", "LayerNorm", [[4, 5]], inputs=[inp(3, 4, 5)]),
    case("layernorm_noaffine", "LayerNorm", [5], {"elementwise_affine": False}, [inp(3, 5)]),
    case("layernorm_nobias", "LayerNorm", [5], {"bias": False}, [inp(2, 3, 5)]),
    # -- convolutions ------------------------------------------------------------------------------------------
    case("conv1d_stride_groups", "Conv1d", [4, 6, 3], {"stride": 2, "padding": 1, "groups": 2}, [inp(2, 4, 9)]),
    case("conv1d_same_dilation", "Conv1d", [3, 4, 4], {"padding": "same", "dilation": 2}, [inp(2, 3, 10)]),
    case("conv1d_valid_nobias", "Conv1d", [3, 2, 3], {"padding": "valid", "bias": False}, [inp(2, 3, 6)]),
    case("conv2d_stride_dilation", "Conv2d", [3, 4, 3], {"stride": 2, "padding": [1, 2], "dilation": [1, 2]},
         [inp(2, 3, 7, 8)]),
    case("conv2d_groups_same", "Conv2d", [4, 6, 3], {"groups": 2, "padding": "same"}, [inp(2, 4, 5, 5)]),
    case("conv2d_same_asymmetric", "Conv2d", [3, 4, [2, 4]], {"padding": "same"}, [inp(2, 3, 5, 6)]),
    case("conv2d_reflect", "Conv2d", [2, 3, 3], {"padding": 1, "padding_mode": "reflect"}, [inp(2, 2, 5, 5)]),
    case("conv2d_circular", "Conv2d", [2, 3, 3], {"padding": 2, "padding_mode": "circular"}, [inp(1, 2, 4, 5)]),
    case("conv2d_replicate", "Conv2d", [2, 3, 3], {"padding": [1, 2], "padding_mode": "replicate"},
         [inp(1, 2, 4, 4)]),
    case("conv2d_1x1_nobias", "Conv2d", [3, 5, 1], {"bias": False}, [inp(2, 3, 4, 4)]),
    case("convtranspose2d_groups", "ConvTranspose2d", [4, 6, 3],
         {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}, [inp(2, 4, 4, 4)]),
    case("convtranspose2d_dilation", "ConvTranspose2d", [3, 2, [3, 2]],
         {"stride": [2, 1], "dilation": 2, "bias": False}, [inp(2, 3, 3, 4)]),
    case("convtranspose2d_stride3", "ConvTranspose2d", [2, 3, 4], {"stride": 3, "padding": 1, "output_padding": 2},
         [inp(1, 2, 3, 3)]),
    # -- pooling -----------------------------------------------------------------------------------------------
    case("maxpool2d_pad", "MaxPool2d", [3], {"stride": 2, "padding": 1}, [inp(2, 3, 7, 7)]),
    case("maxpool2d_ceil", "MaxPool2d", [2], {"ceil_mode": True}, [inp(2, 2, 5, 5)]),
    case("maxpool2d_dilation", "MaxPool2d", [3], {"stride": 2, "dilation": 2}, [inp(1, 2, 9, 9)]),
    case("maxpool2d_rect", "MaxPool2d", [[2, 3]], {"stride": [1, 2], "padding": 1}, [inp(1, 2, 5, 6)]),
    case("avgpool2d_pad", "AvgPool2d", [3], {"stride": 2, "padding": 1}, [inp(2, 3, 7, 7)]),
    case("avgpool2d_exclude_pad", "AvgPool2d", [3, 2, 1], {"count_include_pad": False}, [inp(2, 2, 6, 6)]),
    case("avgpool2d_ceil", "AvgPool2d", [2], {"ceil_mode": True}, [inp(2, 2, 5, 5)]),
    case("avgpool2d_ceil_exclude", "AvgPool2d", [3], {"stride": 2, "padding": 1, "ceil_mode": True,
                                                      "count_include_pad": False}, [inp(1, 2, 6, 6)]),
    case("avgpool2d_divisor", "AvgPool2d", [2], {"divisor_override": 3}, [inp(1, 2, 4, 4)]),
    case("adaptiveavgpool2d", "AdaptiveAvgPool2d", [[3, 2]], inputs=[inp(2, 3, 7, 5)]),
    case("adaptiveavgpool2d_1", "AdaptiveAvgPool2d", [1], inputs=[inp(2, 3, 4, 4)]),
    case("adaptiveavgpool2d_none_3d", "AdaptiveAvgPool2d", [[None, 4]], inputs=[inp(3, 5, 6)]),
    # -- embedding, shapes, linear -----------------------------------------------------------------------------
    case("embedding_padding_idx", "Embedding", [6, 3], {"padding_idx": 2}, [inp(3, 4, kind="int", high=6)]),
    case("embedding", "Embedding", [5, 2], inputs=[inp(7, kind="int", high=5)]),
    case("flatten", "Flatten", [], inputs=[inp(2, 3, 4)]),
    case("flatten_0_1", "Flatten", [0, 1], inputs=[inp(2, 3, 4)]),
    case("unflatten", "Unflatten", [1, [2, 3]], inputs=[inp(4, 6)]),
    case("identity", "Identity", [3], {"unused": 1}, [inp(2, 3)]),
    case("linear", "Linear", [5, 3], inputs=[inp(4, 5)]),
    case("linear_nobias_3d", "Linear", [4, 2], {"bias": False}, [inp(2, 3, 4)]),
    # -- activations -------------------------------------------------------------------------------------------
    *[case(f"act_{name.lower()}{i}", name, a, k, [X]) for i, (name, a, k) in enumerate([
        ("ReLU", [], {}), ("ReLU6", [], {}), ("LeakyReLU", [0.2], {}), ("ELU", [0.7], {}), ("SELU", [], {}),
        ("CELU", [1.3], {}), ("GELU", [], {}), ("GELU", [], {"approximate": "tanh"}), ("SiLU", [], {}),
        ("Mish", [], {}), ("Hardswish", [], {}), ("Hardtanh", [-0.5, 1.5], {}),
        ("Softplus", [], {"beta": 2.0, "threshold": 3.0}), ("Softsign", [], {}), ("LogSigmoid", [], {}),
        ("Tanh", [], {}), ("Sigmoid", [], {}), ("Softmax", [], {"dim": 1}), ("Softmax", [0], {}),
        ("LogSoftmax", [], {"dim": -1})])],
    case("softmax_legacy_dim_3d", "Softmax", [], inputs=[inp(2, 3, 4)]),
    case("logsoftmax_legacy_dim_2d", "LogSoftmax", [], inputs=[inp(3, 4)]),
    # -- unbatched inputs ([C, L], [C, H, W]) and 1-D pooling (a user review: PyTorch takes them) ---------------
    case("conv1d_unbatched", "Conv1d", [3, 4, 3], {"padding": 1}, [inp(3, 7)]),
    case("conv1d_unbatched_reflect", "Conv1d", [2, 3, 3], {"padding": 1, "padding_mode": "reflect"}, [inp(2, 6)]),
    case("conv2d_unbatched", "Conv2d", [3, 4, 3], {"stride": 2, "padding": 1}, [inp(3, 6, 7)]),
    case("conv2d_unbatched_same_circular", "Conv2d", [2, 3, [2, 3]], {"padding": "same", "padding_mode": "circular"},
         [inp(2, 5, 5)]),
    case("convtranspose2d_unbatched", "ConvTranspose2d", [3, 2, 3], {"stride": 2, "padding": 1, "output_padding": 1},
         [inp(3, 4, 4)]),
    case("maxpool2d_unbatched", "MaxPool2d", [3], {"stride": 2, "padding": 1}, [inp(2, 7, 7)]),
    case("avgpool2d_unbatched", "AvgPool2d", [2], {"ceil_mode": True, "divisor_override": 3}, [inp(2, 5, 5)]),
    case("maxpool1d", "MaxPool1d", [3], {"stride": 2, "padding": 1}, [inp(2, 3, 9)]),
    case("maxpool1d_unbatched_ceil_dilation", "MaxPool1d", [2], {"ceil_mode": True, "dilation": 2}, [inp(3, 8)]),
    case("avgpool1d_exclude_pad", "AvgPool1d", [3], {"stride": 2, "padding": 1, "count_include_pad": False},
         [inp(2, 3, 8)]),
    case("avgpool1d_unbatched_ceil", "AvgPool1d", [2], {"ceil_mode": True}, [inp(3, 7)]),
    # -- instance normalisation: PyTorch's defaults, affine, running statistics, unbatched -------------------
    case("instancenorm1d", "InstanceNorm1d", [3], inputs=[inp(4, 3, 6)], steps=2),
    case("instancenorm1d_unbatched_affine", "InstanceNorm1d", [3], {"affine": True}, [inp(3, 6)]),
    case("instancenorm1d_tracked_momentum", "InstanceNorm1d", [3], {"track_running_stats": True, "momentum": 0.3},
         [inp(2, 3, 5)], steps=3),
    case("instancenorm2d", "InstanceNorm2d", [2], inputs=[inp(3, 2, 4, 4)]),
    case("instancenorm2d_affine_tracked", "InstanceNorm2d", [3], {"affine": True, "track_running_stats": True},
         [inp(2, 3, 4, 5)], steps=3),
    case("instancenorm2d_unbatched_tracked_nobias", "InstanceNorm2d", [2],
         {"affine": True, "bias": False, "track_running_stats": True, "eps": 1e-3}, [inp(2, 3, 4)], steps=2),
    case("instancenorm2d_momentum_none", "InstanceNorm2d", [2], {"track_running_stats": True, "momentum": None},
         [inp(2, 2, 3, 3)], steps=2),
    case("instancenorm3d_affine", "InstanceNorm3d", [2], {"affine": True}, [inp(2, 2, 3, 3, 2)]),
    # -- upsampling (F.interpolate as a module) ----------------------------------------------------------------
    # (not 1-D nearest with a scale_factor giving the input's size or twice it: there PyTorch's 1-D forward
    # reads floor(dst / scale_factor) while its backward and its 2-D/3-D forward copy or halve the index, so its
    # own output and gradient disagree; ours is the 2-D rule, whose gradient is its output's)
    case("upsample_nearest_scale2", "Upsample", [], {"scale_factor": 2}, [inp(2, 3, 3, 4)]),
    case("upsample_nearest_size", "Upsample", [], {"size": [5, 7]}, [inp(1, 2, 3, 4)]),
    case("upsample_nearest_size_down", "Upsample", [], {"size": [2, 3]}, [inp(1, 2, 5, 7)]),
    case("upsample_nearest_1d_scale", "Upsample", [], {"scale_factor": 1.7}, [inp(2, 2, 5)]),
    case("upsample_nearest_exact", "Upsample", [], {"scale_factor": [1.5, 0.6], "mode": "nearest-exact"},
         [inp(1, 2, 4, 5)]),
    case("upsample_nearest_3d", "Upsample", [], {"size": [3, 5, 2]}, [inp(1, 2, 2, 3, 4)]),
    case("upsample_bilinear", "Upsample", [], {"scale_factor": 2, "mode": "bilinear"}, [inp(2, 2, 3, 4)]),
    case("upsample_bilinear_align", "Upsample", [], {"size": [5, 3], "mode": "bilinear", "align_corners": True},
         [inp(1, 2, 3, 4)]),
    case("upsample_bilinear_fractional", "Upsample", [], {"scale_factor": [1.3, 2.5], "mode": "bilinear"},
         [inp(1, 2, 4, 3)]),
    case("upsample_bilinear_recompute", "Upsample", [], {"scale_factor": 1.3, "mode": "bilinear",
                                                         "recompute_scale_factor": True}, [inp(1, 1, 4, 5)]),
    case("upsample_bilinear_down", "Upsample", [], {"size": [3, 2], "mode": "bilinear"}, [inp(1, 2, 7, 5)]),
    case("upsample_linear", "Upsample", [], {"scale_factor": 3, "mode": "linear"}, [inp(2, 2, 4)]),
    case("upsample_linear_align_down", "Upsample", [], {"size": 3, "mode": "linear", "align_corners": True},
         [inp(1, 2, 7)]),
    case("upsample_trilinear", "Upsample", [], {"size": [3, 4, 2], "mode": "trilinear"}, [inp(1, 2, 2, 3, 4)]),
    case("upsample_area", "Upsample", [], {"size": [2, 3], "mode": "area"}, [inp(1, 2, 5, 7)]),
    case("upsamplingbilinear2d", "UpsamplingBilinear2d", [], {"scale_factor": 2}, [inp(1, 2, 3, 3)]),
    case("upsamplingnearest2d", "UpsamplingNearest2d", [], {"size": [4, 5]}, [inp(1, 2, 2, 3)]),
    # -- what porting PyTorch scripts reached for next: learnt slopes, bilinear forms, padding, adaptive pooling --
    case("prelu_shared", "PReLU", [], inputs=[inp(3, 4, 5)]),
    case("prelu_channels_init", "PReLU", [4, 0.1], inputs=[inp(2, 4, 3, 3)]),
    case("prelu_channels_2d", "PReLU", [], {"num_parameters": 5}, [inp(3, 5)]),
    case("bilinear", "Bilinear", [3, 4, 5], inputs=[inp(6, 3), inp(6, 4)]),
    case("bilinear_nobias_3d", "Bilinear", [2, 3, 4], {"bias": False}, [inp(2, 3, 2), inp(2, 3, 3)]),
    case("bilinear_unbatched", "Bilinear", [2, 3, 2], inputs=[inp(2), inp(3)]),
    case("zeropad2d", "ZeroPad2d", [[1, 2, 0, 1]], inputs=[inp(2, 2, 3, 4)]),
    case("zeropad1d_crop", "ZeroPad1d", [[-1, 2]], inputs=[inp(2, 3, 5)]),
    case("constantpad1d", "ConstantPad1d", [2, 3.5], inputs=[inp(2, 3, 4)]),
    case("constantpad2d", "ConstantPad2d", [[1, 0, 2, 1], -1.0], inputs=[inp(2, 3, 3)]),
    case("constantpad3d", "ConstantPad3d", [1, 0.5], inputs=[inp(1, 2, 2, 2, 3)]),
    case("reflectionpad1d", "ReflectionPad1d", [[2, 1]], inputs=[inp(2, 3, 5)]),
    case("reflectionpad2d", "ReflectionPad2d", [1], inputs=[inp(2, 2, 4, 5)]),
    case("reflectionpad2d_unbatched", "ReflectionPad2d", [[2, 0, 1, 3]], inputs=[inp(2, 5, 4)]),
    case("replicationpad1d", "ReplicationPad1d", [[0, 3]], inputs=[inp(2, 4)]),
    case("replicationpad2d", "ReplicationPad2d", [[1, 2, 3, 0]], inputs=[inp(1, 2, 3, 3)]),
    case("replicationpad3d", "ReplicationPad3d", [1], inputs=[inp(1, 2, 2, 3, 2)]),
    case("circularpad2d", "CircularPad2d", [[1, 2, 2, 1]], inputs=[inp(1, 2, 3, 4)]),
    case("adaptivemaxpool2d", "AdaptiveMaxPool2d", [[3, 2]], inputs=[inp(2, 3, 7, 5)]),
    case("adaptivemaxpool2d_divides", "AdaptiveMaxPool2d", [2], inputs=[inp(2, 2, 4, 6)]),
    case("adaptivemaxpool2d_none_unbatched", "AdaptiveMaxPool2d", [[None, 3]], inputs=[inp(2, 4, 5)]),
    case("adaptivemaxpool2d_upsample", "AdaptiveMaxPool2d", [[5, 4]], inputs=[inp(1, 2, 3, 3)]),
    case("adaptivemaxpool1d", "AdaptiveMaxPool1d", [3], inputs=[inp(2, 3, 7)]),
    case("adaptiveavgpool1d", "AdaptiveAvgPool1d", [3], inputs=[inp(2, 3, 7)]),
    case("adaptiveavgpool1d_unbatched", "AdaptiveAvgPool1d", [4], inputs=[inp(3, 6)]),
]

REDUCTIONS = ("mean", "sum", "none")
W4 = {"const": [0.5, 1.0, 2.0, 1.5]}  # class weights (buffers, so they travel in the state dict)
LOSS_CASES: list[dict] = [
    *[case(f"mse_{r}", "MSELoss", [], {"reduction": r}, [inp(3, 4), inp(3, 4)]) for r in REDUCTIONS],
    *[case(f"l1_{r}", "L1Loss", [], {"reduction": r}, [inp(3, 4), inp(3, 4, grad=False)]) for r in REDUCTIONS],
    case("ce_default", "CrossEntropyLoss", [], {}, [inp(5, 4), inp(5, kind="int", high=4)]),
    *[case(f"ce_weight_ignore_smooth_{r}", "CrossEntropyLoss", [],
           {"weight": W4, "ignore_index": 1, "label_smoothing": 0.1, "reduction": r},
           [inp(6, 4), inp(6, kind="int", high=4)]) for r in REDUCTIONS],
    case("ce_probabilities_smooth", "CrossEntropyLoss", [], {"label_smoothing": 0.2},
         [inp(5, 4), inp(5, 4, kind="simplex", grad=False)]),
    case("ce_probabilities_weight_sum", "CrossEntropyLoss", [], {"weight": W4, "reduction": "sum"},
         [inp(5, 4), inp(5, 4, kind="simplex")]),
    case("ce_spatial_weight", "CrossEntropyLoss", [], {"weight": W4}, [inp(3, 4, 5), inp(3, 5, kind="int", high=4)]),
    *[case(f"nll_weight_ignore_{r}", "NLLLoss", [], {"weight": W4, "ignore_index": 0, "reduction": r},
           [inp(6, 4, kind="logsimplex"), inp(6, kind="int", high=4)]) for r in REDUCTIONS],
    *[case(f"bce_{r}", "BCELoss", [], {"reduction": r}, [inp(4, 3, kind="prob"), inp(4, 3, kind="prob")])
      for r in REDUCTIONS],
    case("bce_weight", "BCELoss", [], {"weight": {"const": [0.5, 2.0, 1.0]}},
         [inp(4, 3, kind="prob"), inp(4, 3, kind="prob", grad=False)]),
    *[case(f"bce_logits_pos_weight_{r}", "BCEWithLogitsLoss", [], {"pos_weight": {"const": [0.5, 2.0, 3.0]},
                                                                   "reduction": r},
           [inp(4, 3, scale=2.0), inp(4, 3, kind="prob")]) for r in REDUCTIONS],
    case("bce_logits_weight", "BCEWithLogitsLoss", [], {"weight": {"const": [1.5, 0.5, 1.0]}},
         [inp(4, 3, scale=2.0), inp(4, 3, kind="prob", grad=False)]),
    *[case(f"huber_{r}", "HuberLoss", [], {"reduction": r, "delta": 0.7}, [inp(3, 5, scale=1.5), inp(3, 5)])
      for r in REDUCTIONS],
    *[case(f"smooth_l1_{r}", "SmoothL1Loss", [], {"reduction": r, "beta": 0.5}, [inp(3, 5, scale=1.5), inp(3, 5)])
      for r in REDUCTIONS],
    *[case(f"kldiv_{r}", "KLDivLoss", [], {"reduction": r},
           [inp(4, 5, kind="logsimplex"), inp(4, 5, kind="simplex")]) for r in ("batchmean", *REDUCTIONS)],
    case("kldiv_log_target_sum", "KLDivLoss", [], {"reduction": "sum", "log_target": True},
         [inp(4, 5, kind="logsimplex"), inp(4, 5, kind="logsimplex")]),
    *[case(f"cosine_embedding_{r}", "CosineEmbeddingLoss", [], {"margin": 0.2, "reduction": r},
           [inp(5, 4), inp(5, 4), inp(5, kind="sign")]) for r in REDUCTIONS],
]


R = [{"in": i} for i in range(6)]  # references to a functional case's inputs, in its positional or keyword args


def fcase(name: str, fn: str, inputs: list, args: list | None = None, kwargs: dict | None = None,
          mutated: tuple[int, ...] = ()) -> dict:
    """A torch.nn.functional call fn(*args, **kwargs), where {"in": i} stands for input i (args None: every
    input in order); `mutated`: inputs the call writes in place (their values after it are recorded)."""
    return {"name": name, "fn": fn, "inputs": inputs, "args": R[:len(inputs)] if args is None else args,
            "kwargs": kwargs or {}, "mutated": list(mutated)}


def resolve(value: Any, xs: list) -> Any:
    """A functional case's argument with its input references replaced by the inputs themselves."""
    if isinstance(value, dict) and set(value) == {"in"}:
        return xs[value["in"]]
    return value


FUNCTIONAL_CASES: list[dict] = [
    fcase("linear", "linear", [inp(4, 5), inp(3, 5), inp(3)]),
    fcase("pad_constant", "pad", [inp(2, 3, 4)], [R[0], [1, 2, 0, 1]], {"value": 0.5}),
    fcase("pad_reflect", "pad", [inp(1, 2, 4, 5)], [R[0], [2, 1, 1, 2]], {"mode": "reflect"}),
    fcase("pad_replicate", "pad", [inp(1, 2, 3, 3)], [R[0], [1, 1, 2, 0]], {"mode": "replicate"}),
    fcase("pad_circular", "pad", [inp(1, 2, 5)], [R[0], [2, 3]], {"mode": "circular"}),
    fcase("normalize", "normalize", [inp(3, 4)], None, {"p": 2.0, "dim": 1}),
    fcase("normalize_p1_dim0", "normalize", [inp(3, 4)], None, {"p": 1.0, "dim": 0}),
    fcase("sdpa_mask", "scaled_dot_product_attention", [inp(2, 3, 4, 5), inp(2, 3, 6, 5), inp(2, 3, 6, 2),
                                                         inp(4, 6, grad=False)]),
    fcase("sdpa_causal_scale", "scaled_dot_product_attention", [inp(2, 4, 3), inp(2, 4, 3), inp(2, 4, 3)], None,
          {"is_causal": True, "scale": 0.7}),
    fcase("batch_norm_train", "batch_norm", [inp(4, 3, 2), inp(3, grad=False), inp(3, kind="pos", grad=False),
                                             inp(3), inp(3)], None, {"training": True, "momentum": 0.2},
          mutated=(1, 2)),
    fcase("batch_norm_eval", "batch_norm", [inp(4, 3), inp(3, grad=False), inp(3, kind="pos", grad=False),
                                            inp(3), inp(3)], None, {"training": False, "eps": 1e-3}),
    fcase("layer_norm", "layer_norm", [inp(2, 3, 4), inp(3, 4), inp(3, 4)], [R[0], [3, 4], R[1], R[2]],
          {"eps": 1e-4}),
    fcase("group_norm", "group_norm", [inp(2, 4, 3), inp(4), inp(4)], [R[0], 2, R[1], R[2]]),
    fcase("conv2d_same", "conv2d", [inp(1, 2, 5, 5), inp(3, 2, 2, 3), inp(3)], None, {"padding": "same"}),
    fcase("conv1d_valid", "conv1d", [inp(1, 2, 6), inp(3, 2, 3)], None, {"padding": "valid", "stride": 2}),
    fcase("conv_transpose2d", "conv_transpose2d", [inp(1, 2, 3, 3), inp(2, 3, 3, 3)], None,
          {"stride": 2, "output_padding": 1}),
    fcase("max_pool2d", "max_pool2d", [inp(1, 2, 5, 5)], [R[0], 3], {"stride": 2, "padding": 1, "ceil_mode": True}),
    fcase("avg_pool2d", "avg_pool2d", [inp(1, 2, 5, 5)], [R[0], 3], {"stride": 2, "padding": 1,
                                                                   "count_include_pad": False}),
    fcase("adaptive_avg_pool2d", "adaptive_avg_pool2d", [inp(1, 2, 5, 7)], [R[0], [2, 3]]),
    fcase("adaptive_max_pool2d", "adaptive_max_pool2d", [inp(1, 2, 5, 7)], [R[0], [2, 3]]),
    fcase("adaptive_max_pool1d", "adaptive_max_pool1d", [inp(2, 3, 8)], [R[0], 3]),
    fcase("adaptive_avg_pool1d", "adaptive_avg_pool1d", [inp(2, 5)], [R[0], 3]),
    fcase("prelu", "prelu", [inp(2, 3, 4), inp(3)]),
    fcase("prelu_0d", "prelu", [inp(), inp(1)]),
    fcase("bilinear", "bilinear", [inp(4, 2), inp(4, 3), inp(5, 2, 3), inp(5)]),
    fcase("embedding", "embedding", [inp(2, 3, kind="int", high=4), inp(4, 2)], None, {"padding_idx": 0}),
    fcase("cosine_similarity", "cosine_similarity", [inp(3, 4), inp(3, 4)], None, {"dim": 1}),
    fcase("softmax_legacy", "softmax", [inp(3, 4)]),
    fcase("log_softmax_dim0", "log_softmax", [inp(3, 4)], [R[0], 0]),
    fcase("gelu_tanh", "gelu", [inp(3, 4)], None, {"approximate": "tanh"}),
    fcase("leaky_relu", "leaky_relu", [inp(3, 4)], [R[0], 0.3]),
    fcase("cross_entropy_positional_weight", "cross_entropy", [inp(5, 4), inp(5, kind="int", high=4),
                                                               inp(4, kind="pos", grad=False)]),
    fcase("nll_loss_legacy_sum", "nll_loss", [inp(5, 4, kind="logsimplex"), inp(5, kind="int", high=4)], None,
          {"size_average": False}),
    fcase("bce_with_logits_pos_weight", "binary_cross_entropy_with_logits",
          [inp(3, 2), inp(3, 2, kind="prob"), inp(2, kind="pos", grad=False)], [R[0], R[1]],
          {"reduction": "sum", "pos_weight": R[2]}),
    fcase("kl_div_batchmean", "kl_div", [inp(3, 4, kind="logsimplex"), inp(3, 4, kind="simplex")], None,
          {"reduction": "batchmean"}),
    fcase("cosine_embedding_loss", "cosine_embedding_loss", [inp(4, 3), inp(4, 3), inp(4, kind="sign")], None,
          {"margin": -0.3}),
    fcase("one_hot", "one_hot", [inp(2, 3, kind="int", high=4)], [R[0], 5]),
    # unbatched inputs, 1-D pooling, instance_norm, interpolate (a user review)
    fcase("conv2d_unbatched", "conv2d", [inp(2, 5, 5), inp(3, 2, 3, 3), inp(3)], None, {"padding": 1}),
    fcase("conv1d_unbatched_same", "conv1d", [inp(2, 7), inp(3, 2, 4)], None, {"padding": "same"}),
    fcase("conv_transpose2d_unbatched", "conv_transpose2d", [inp(2, 3, 3), inp(2, 3, 2, 2)], None, {"stride": 2}),
    fcase("max_pool2d_unbatched", "max_pool2d", [inp(2, 5, 5)], [R[0], 2]),
    fcase("avg_pool2d_unbatched", "avg_pool2d", [inp(2, 5, 5)], [R[0], 3], {"stride": 2, "padding": 1}),
    fcase("max_pool1d", "max_pool1d", [inp(2, 3, 7)], [R[0], 3], {"stride": 2, "padding": 1}),
    fcase("max_pool1d_unbatched_ceil", "max_pool1d", [inp(3, 7)], [R[0], 2], {"ceil_mode": True}),
    fcase("avg_pool1d_unbatched", "avg_pool1d", [inp(3, 7)], [R[0], 3], {"stride": 2, "padding": 1,
                                                                       "count_include_pad": False}),
    fcase("instance_norm_running", "instance_norm", [inp(2, 3, 4), inp(3, grad=False), inp(3, kind="pos", grad=False),
                                                     inp(3), inp(3)], None, {"momentum": 0.2}, mutated=(1, 2)),
    fcase("instance_norm_eval", "instance_norm", [inp(2, 3, 4), inp(3, grad=False), inp(3, kind="pos", grad=False)],
          None, {"use_input_stats": False, "eps": 1e-3}),
    fcase("interpolate_nearest", "interpolate", [inp(1, 2, 3, 4)], None, {"scale_factor": 2}),
    fcase("interpolate_nearest_size", "interpolate", [inp(1, 2, 7, 6)], None, {"size": [3, 4]}),
    fcase("interpolate_bilinear_align", "interpolate", [inp(2, 1, 3, 4)], None,
          {"size": [6, 7], "mode": "bilinear", "align_corners": True}),
    fcase("interpolate_bilinear_down", "interpolate", [inp(1, 2, 7, 5)], None, {"scale_factor": 0.6,
                                                                              "mode": "bilinear"}),
    fcase("interpolate_linear", "interpolate", [inp(2, 3, 5)], None, {"size": 8, "mode": "linear"}),
    fcase("interpolate_area_1d", "interpolate", [inp(1, 2, 7)], None, {"size": 3, "mode": "area"}),
]


# -- models built by both frameworks -----------------------------------------------------------------------------
def basic_block(nn: Any, channels: int) -> Any:
    """conv-BN-ReLU-conv-BN plus the input, as ResNet's basic block (a Module subclass of `nn`)."""

    class BasicBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)
            self.act = nn.ReLU()

        def forward(self, x: Any) -> Any:
            return self.act(self.bn2(self.conv2(self.act(self.bn1(self.conv1(x))))) + x)

    return BasicBlock()


def small_resnet(nn: Any, ones: Callable[[int], Any]) -> Any:
    """The model case: stem, two basic blocks, GroupNorm, pooling, dropout, a head with LayerNorm."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
        basic_block(nn, 6),
        nn.Conv2d(6, 8, 3, stride=2, padding=1), nn.GroupNorm(2, 8), nn.SiLU(),
        basic_block(nn, 8),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0),
        nn.Linear(8, 12), nn.LayerNorm(12), nn.GELU(), nn.Linear(12, 4),
    )


def nested_containers(nn: Any, ones: Callable[[int], Any]) -> Any:
    """The structure case: ModuleList, ModuleDict, ParameterList and a weighted loss in a Module."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3)), nn.Linear(3, 3)])
            self.heads = nn.ModuleDict({"cls": nn.Linear(3, 2), "reg": nn.Sequential(nn.Identity(),
                                                                                    nn.Linear(3, 1))})
            self.scales = nn.ParameterList([nn.Parameter(ones(3)), nn.Parameter(ones(1))])
            self.loss = nn.CrossEntropyLoss(weight=ones(2))

        def forward(self, x: Any) -> Any:
            for b in self.blocks:
                x = b(x) * self.scales[0]
            return self.heads["cls"](x), self.heads["reg"](x) * self.scales[1]

    return Net()


def parameter_dict(nn: Any, ones: Callable[[int], Any]) -> Any:
    """The structure case of the later modules: a ParameterDict beside PReLU, Bilinear, a padding and a pooling."""

    class Gated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gates = nn.ParameterDict({"scale": nn.Parameter(ones(3)), "shift": nn.Parameter(ones(3))})
            self.body = nn.Sequential(nn.ReflectionPad1d(1), nn.PReLU(3), nn.AdaptiveMaxPool1d(2))
            self.pair = nn.Bilinear(3, 3, 2)

    return Gated()


MODELS: dict[str, Callable[[Any, Callable[[int], Any]], Any]] = {"small_resnet": small_resnet,
                                                                 "nested_containers": nested_containers,
                                                                 "parameter_dict": parameter_dict}


# -- the generator (PyTorch) -------------------------------------------------------------------------------------
def draw(spec: dict, rng: np.random.Generator) -> np.ndarray:
    shape, kind = tuple(spec["shape"]), spec["kind"]
    if kind == "int":
        return rng.integers(0, spec["high"], shape)
    if kind == "sign":
        return rng.choice([-1, 1], shape)
    if kind == "prob":
        return rng.uniform(0.05, 0.95, shape)
    if kind == "pos":
        return rng.uniform(0.1, 2.0, shape)
    if kind in ("simplex", "logsimplex"):
        z = rng.standard_normal(shape)
        p = np.exp(z) / np.exp(z).sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
        return np.log(p) if kind == "logsimplex" else p
    return rng.standard_normal(shape) * spec["scale"]


def encode(a: Any) -> dict:
    arr = np.asarray(a)
    return {"dtype": str(arr.dtype), "shape": list(arr.shape), "data": arr.reshape(-1).tolist()}


def main() -> None:
    import torch
    import torch.nn as tnn
    import torch.nn.functional as tF

    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(14)

    def kw(kwargs: dict) -> dict:
        """Constants as tensors, lists as tuples (nn.Upsample takes a tuple of scale factors, not a list)."""
        return {k: torch.tensor(v["const"]) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v
                for k, v in kwargs.items()}

    def tensors(specs: list, arrays: list) -> list:
        return [torch.tensor(a).requires_grad_(spec["grad"]) for spec, a in zip(specs, arrays, strict=True)]

    def backward(out: Any) -> np.ndarray:
        w = rng.standard_normal(tuple(out.shape))
        (out * torch.tensor(w)).sum().backward()
        return w

    modules = []
    for c in MODULE_CASES + LOSS_CASES:
        m = getattr(tnn, c["module"])(*c["args"], **kw(c["kwargs"]))
        keys = list(m.state_dict())
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.5 + (1.0 if p.ndim == 1 else 0.0)))
        state = {k: encode(v.numpy()) for k, v in m.state_dict().items()}
        steps = [[draw(s, rng) for s in c["inputs"]] for _ in range(c["steps"])]
        for arrays in steps[:-1]:
            m(*tensors(c["inputs"], arrays))
        xs = tensors(c["inputs"], steps[-1])
        out = m(*xs)
        w = backward(out)
        grads = {f"input{i}": x.grad.numpy().tolist() for i, x in enumerate(xs) if x.grad is not None}
        grads.update({k: p.grad.numpy().tolist() for k, p in m.named_parameters()})
        after = {k: encode(v.numpy()) for k, v in m.state_dict().items()}
        m.eval()
        eval_x = [draw(s, rng) for s in c["inputs"]]
        with torch.no_grad():
            eval_out = m(*tensors(c["inputs"], eval_x))
        modules.append({"name": c["name"], "state_keys": keys, "state": state, "steps": [[encode(a) for a in s]
                                                                                          for s in steps],
                        "out": encode(out.detach().numpy()), "out_weight": encode(w), "grads": grads,
                        "state_after": after, "eval_inputs": [encode(a) for a in eval_x],
                        "eval_out": encode(eval_out.detach().numpy())})

    functional = []
    for c in FUNCTIONAL_CASES:
        arrays = [draw(s, rng) for s in c["inputs"]]
        xs = tensors(c["inputs"], arrays)
        args = [resolve(a, xs) for a in c["args"]]
        kwargs = {k: resolve(v, xs) for k, v in c["kwargs"].items()}
        out = getattr(tF, c["fn"])(*args, **kwargs)
        record: dict = {"name": c["name"], "inputs": [encode(a) for a in arrays], "out": encode(out.detach().numpy())}
        if out.dtype.is_floating_point and any(x.requires_grad for x in xs):
            record["out_weight"] = encode(backward(out))
            record["grads"] = {f"input{i}": x.grad.numpy().tolist() for i, x in enumerate(xs) if x.grad is not None}
        record["mutated"] = {str(i): encode(xs[i].detach().numpy()) for i in c["mutated"]}
        functional.append(record)

    structure = {}
    torch.manual_seed(0)
    for name, build in MODELS.items():
        model = build(tnn, torch.ones)
        structure[name] = {"named_modules": [n for n, _ in model.named_modules()],
                           "named_parameters": [n for n, _ in model.named_parameters()],
                           "state_keys": list(model.state_dict()),
                           "children": [n for n, _ in model.named_children()]}

    # the model case: a real PyTorch state dict after a few SGD steps, then eval and train outputs
    torch.manual_seed(1)
    model = small_resnet(tnn, torch.ones)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(4):
        xb = torch.tensor(rng.standard_normal((8, 1, 8, 8)))
        yb = torch.tensor(rng.integers(0, 4, 8))
        opt.zero_grad()
        tF.cross_entropy(model(xb), yb).backward()
        opt.step()
    state = {k: encode(v.numpy()) for k, v in model.state_dict().items()}
    x_eval = rng.standard_normal((5, 1, 8, 8))
    model.eval()
    with torch.no_grad():
        eval_out = model(torch.tensor(x_eval)).numpy()
    model.train()
    opt.zero_grad()
    x_train = torch.tensor(rng.standard_normal((6, 1, 8, 8)), requires_grad=True)
    train_out = model(x_train)
    w = backward(train_out)
    trained = {"state": state, "eval_input": encode(x_eval), "eval_out": encode(eval_out),
               "train_input": encode(x_train.detach().numpy()), "train_out": encode(train_out.detach().numpy()),
               "out_weight": encode(w), "grads": {"input0": x_train.grad.numpy().tolist(),
                                                  **{k: p.grad.numpy().tolist()
                                                     for k, p in model.named_parameters()}},
               "state_after": {k: encode(v.numpy()) for k, v in model.state_dict().items()}}

    doc = {"generator": f"tests/nn/make_module_reference.py with torch {torch.__version__}, float64",
           "modules": modules, "functional": functional, "structure": structure, "trained_model": trained}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc))
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB): {len(modules)} module cases, {len(functional)} "
          f"functional cases, {len(structure)} structures, a trained model")


if __name__ == "__main__":
    main()
