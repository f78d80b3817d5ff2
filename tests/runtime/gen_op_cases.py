#!/usr/bin/python3
"""Writes tests/runtime/data/op_cases.txt: host-kernel cases whose expected
outputs are computed by PyTorch (Debian's torch 1.13 on the CPU).

    /usr/bin/python3 tests/runtime/gen_op_cases.py > tests/runtime/data/op_cases.txt

Each case calls one ATen operator through torch.ops.aten with every schema
argument given explicitly (the C++ test, op_cases_test.cc, binds them in the
same order, one KernelArg each) and records the inputs and PyTorch's outputs.
The C++ test needs no Python: the data file is checked in.

Format, one item per line:
    case NAME
    op aten::NAME.OVERLOAD
    arg none | int V | float V | bool 0|1 | ints A,B,.. (or -) | str S
    arg dtype f32|f64|f16|bf16|i64|i32|bool
    arg tensor DTYPE SIZES V V V ...     SIZES: 2,3 (or - for 0-dim)
    arg tensors N      followed by N lines: tensor DTYPE SIZES V ...
    out DTYPE SIZES V V ...    (or `out DTYPE SIZES any`: not compared)
    end
f64 values are written with repr(), the others with 9 significant digits
(both exact).
"""
import sys

import torch

torch.manual_seed(0)
aten = torch.ops.aten
DT = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
      torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32",
      torch.bool: "bool"}
lines = []


def tensor_text(t):
    t = t.detach().contiguous()
    sizes = ",".join(str(s) for s in t.shape) if t.dim() else "-"
    flat = t.reshape(-1)
    if t.dtype == torch.float64:
        vals = " ".join(repr(float(x)) for x in flat.tolist())
    elif t.dtype.is_floating_point:  # 9 digits round-trip f32 (f16, bf16)
        vals = " ".join("%.9g" % x for x in flat.double().tolist())
    elif t.dtype == torch.bool:
        vals = " ".join("1" if x else "0" for x in flat.tolist())
    else:
        vals = " ".join(str(int(x)) for x in flat.tolist())
    return f"{DT[t.dtype]} {sizes} {vals}".rstrip()


def arg_text(a):
    if a is None:
        return "none"
    if isinstance(a, torch.dtype):
        return f"dtype {DT[a]}"
    if isinstance(a, bool):
        return f"bool {int(a)}"
    if isinstance(a, int):
        return f"int {a}"
    if isinstance(a, float):
        return f"float {a!r}"
    if isinstance(a, str):
        return f"str {a}"
    if isinstance(a, torch.Tensor):
        return "tensor " + tensor_text(a)
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
        return f"tensors {len(a)}\n" + "\n".join(
            "tensor " + tensor_text(t) for t in a)
    if isinstance(a, (list, tuple)):
        return "ints " + (",".join(str(int(x)) for x in a) if a else "-")
    raise TypeError(a)


def case(name, op, args, compare=None, compute=None):
    """Runs op(*args) (or compute(*args)) and records it. `compare[i]`
    False leaves output i uncompared."""
    schema_args = op._schema.arguments
    positional = [a for a, s in zip(args, schema_args) if not s.kwarg_only]
    kwargs = {s.name: a for a, s in zip(args, schema_args) if s.kwarg_only}
    result = (compute or op)(*positional, **kwargs)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    lines.append(f"case {name}")
    lines.append(f"op aten::{op._schema.name.split('::')[1]}"
                 + (f".{op._schema.overload_name}"
                    if op._schema.overload_name else ""))
    for a in args:
        lines.append("arg " + arg_text(a))
    for i, o in enumerate(outs):
        if o is None:  # an undefined result: an empty f32 output
            lines.append("out f32 0 any")
        elif compare is not None and not compare[i]:
            sizes = ",".join(str(s) for s in o.shape) if o.dim() else "-"
            lines.append(f"out {DT[o.dtype]} {sizes} any")
        else:
            lines.append("out " + tensor_text(o))
    lines.append("end")


def r(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale).to(dtype)


def via_f32(fn, dtype):
    """fn computed in f32 on f32 copies, rounded once to dtype (what Ferry's
    16-bit kernels do; torch 1.13's CPU has no f16 convolution)."""
    def run(*args, **kwargs):
        conv = [a.float() if isinstance(a, torch.Tensor) and
                a.dtype.is_floating_point else a for a in args]
        out = fn(*conv, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.to(dtype) for o in out)
        return out.to(dtype)
    return run


conv = aten.convolution.default
# convolution(input, weight, bias, stride, padding, dilation, transposed,
#             output_padding, groups)
case("conv2d_3x3_pad1", conv,
     [r(2, 3, 6, 6), r(4, 3, 3, 3), r(4), [1, 1], [1, 1], [1, 1], False,
      [0, 0], 1])
case("conv2d_stride2_dilation2_groups2", conv,
     [r(1, 4, 9, 8), r(6, 2, 3, 2), r(6), [2, 2], [1, 0], [2, 1], False,
      [0, 0], 2])
case("conv2d_depthwise", conv,
     [r(2, 5, 7, 7), r(5, 1, 3, 3), r(5), [2, 2], [1, 1], [1, 1], False,
      [0, 0], 5])
case("conv2d_depthwise_stride1_nobias", conv,
     [r(1, 3, 5, 6), r(3, 1, 3, 3), None, [1, 1], [1, 1], [1, 1], False,
      [0, 0], 3])
case("conv2d_pointwise", conv,
     [r(2, 6, 4, 4), r(5, 6, 1, 1), None, [1, 1], [0, 0], [1, 1], False,
      [0, 0], 1])
case("conv2d_7x7_stride2_pad3", conv,
     [r(1, 3, 12, 12), r(4, 3, 7, 7), None, [2, 2], [3, 3], [1, 1], False,
      [0, 0], 1])
case("conv1d", conv,
     [r(2, 3, 10), r(4, 3, 3), r(4), [2], [1], [1], False, [0], 1])
case("conv2d_f64", conv,
     [r(1, 2, 5, 5, dtype=torch.float64), r(3, 2, 3, 3, dtype=torch.float64),
      r(3, dtype=torch.float64), [1, 1], [1, 1], [1, 1], False, [0, 0], 1])
case("conv2d_f16", conv,
     [r(1, 2, 5, 5, dtype=torch.float16), r(3, 2, 3, 3, dtype=torch.float16),
      r(3, dtype=torch.float16), [1, 1], [0, 0], [1, 1], False, [0, 0], 1],
     compute=via_f32(conv, torch.float16))
case("conv2d_bf16", conv,
     [r(1, 2, 5, 5, dtype=torch.bfloat16),
      r(3, 2, 3, 3, dtype=torch.bfloat16), None, [1, 1], [1, 1], [1, 1],
      False, [0, 0], 1],
     compute=via_f32(conv, torch.bfloat16))

bn = aten.native_batch_norm.default
# native_batch_norm(input, weight, bias, running_mean, running_var, training,
#                   momentum, eps)
var = torch.rand(3) + 0.5
case("batch_norm_eval", bn,
     [r(2, 3, 4, 4), r(3), r(3), r(3), var, False, 0.1, 1e-5])
case("batch_norm_eval_no_affine_f64", bn,
     [r(2, 3, 5, dtype=torch.float64), None, None, r(3, dtype=torch.float64),
      var.double(), False, 0.1, 1e-3])
case("batch_norm_training", bn,
     [r(4, 3, 2, 2), r(3), r(3), torch.zeros(3), torch.ones(3), True, 0.1,
      1e-5])

mp = aten.max_pool2d_with_indices.default
# max_pool2d_with_indices(self, kernel_size, stride, padding, dilation,
#                         ceil_mode)
case("max_pool_3x3_s2_p1", mp, [r(2, 3, 8, 8), [3, 3], [2, 2], [1, 1],
                                [1, 1], False])
case("max_pool_dilation_ceil", mp, [r(1, 2, 7, 7), [2, 2], [2, 2], [0, 0],
                                    [2, 2], True])
case("max_pool_f64_3d", mp, [r(2, 6, 5, dtype=torch.float64), [2, 2],
                             [1, 2], [1, 1], [1, 1], False])

case("hardtanh", aten.hardtanh.default, [r(3, 4, scale=3), -1.0, 1.0])
case("hardtanh_relu6", aten.hardtanh.default, [r(10, scale=5), 0.0, 6.0])
case("mean_dim_keepdim", aten.mean.dim,
     [r(2, 3, 4, 5), [-1, -2], True, None])
case("mean_dim_f64", aten.mean.dim,
     [r(3, 4, dtype=torch.float64), [0], False, None])
case("addmm", aten.addmm.default, [r(4), r(3, 5), r(5, 4), 1, 1])
case("addmm_beta_alpha", aten.addmm.default,
     [r(3, 4), r(3, 2), r(2, 4), 0.5, 2.0])
case("embedding", aten.embedding.default,
     [r(10, 4), torch.tensor([[1, 3, 0], [9, 3, 2]]), -1, False, False])
case("embedding_padding_idx", aten.embedding.default,
     [r(6, 3), torch.tensor([0, 5, 2, 0]), 0, False, False])
case("layer_norm", aten.native_layer_norm.default,
     [r(2, 3, 8), [8], r(8), r(8), 1e-5])
case("layer_norm_no_affine", aten.native_layer_norm.default,
     [r(4, 6), [6], None, None, 1e-5])
case("gelu", aten.gelu.default, [r(3, 5, scale=3), "none"])
case("gelu_tanh", aten.gelu.default, [r(3, 5, scale=3), "tanh"])
case("softmax", aten._softmax.default, [r(3, 7, scale=10), 1, False])
case("softmax_dim0_large", aten._softmax.default,
     [r(4, 3, scale=200), 0, False])
case("log_softmax", aten._log_softmax.default, [r(2, 3, 5, scale=10), -1,
                                                False])
case("log_softmax_f64", aten._log_softmax.default,
     [r(3, 4, dtype=torch.float64, scale=50), 1, False])
case("arange_end", aten.arange.default, [5, torch.int64, None, None, None])
case("arange_start", aten.arange.start, [2, 7, torch.int64, None, None, None])
case("arange_start_step_f32", aten.arange.start_step,
     [0.0, 1.0, 0.25, torch.float32, None, None, None])
case("ones", aten.ones.default, [[2, 3], torch.float32, None, None, None])
case("zeros_i64", aten.zeros.default, [[3, 2], torch.int64, None, None, None])
case("triu", aten.triu.default, [r(4, 5), 0])
case("triu_diag1_batched", aten.triu.default, [r(2, 3, 4), 1])
case("triu_diag_neg1_i64", aten.triu.default,
     [torch.arange(12).reshape(3, 4), -1])
case("triu_bool", aten.triu.default, [torch.ones(4, 4, dtype=torch.bool), 1])
case("masked_fill_scalar", aten.masked_fill.Scalar,
     [r(2, 4, 4), torch.ones(4, 4, dtype=torch.bool).triu(1),
      float("-inf")])
case("masked_fill_scalar_i64", aten.masked_fill.Scalar,
     [torch.arange(6).reshape(2, 3), torch.tensor([True, False, True]), 7])
case("cat_dim1", aten.cat.default, [[r(2, 3), r(2, 1), r(2, 2)], 1])
case("unsafe_view", aten._unsafe_view.default, [r(2, 3, 4), [6, 4]])

mha = aten._native_multi_head_attention.default
E, H = 8, 2
q = r(2, 3, E)
mha_w = [r(3 * E, E, scale=0.3), r(3 * E), r(E, E, scale=0.3), r(E)]
# (query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
#  proj_weight, proj_bias, mask, need_weights, average_attn_weights,
#  mask_type)
case("mha_self_no_weights", mha,
     [q, q, q, E, H] + mha_w + [None, False, True, None], compare=[True, False])
case("mha_self_weights_avg", mha,
     [q, q, q, E, H] + mha_w + [None, True, True, None])
kv = r(2, 3, E)  # 1.13 requires the shapes of query, key and value to match
case("mha_cross_weights_per_head", mha,
     [q, kv, kv, E, H] + mha_w + [None, True, False, None])

# The im2col + BLAS convolution (runtime/ops/nn_conv.cc) on the shapes its
# paths split on: depthwise with stride, padding and dilation (mobilenet_v2's
# blocks, dilated), grouped 1-D, groups with a stride in f64, a 16-bit
# depthwise, and a batch of several items whose im2col buffer is reused.
case("conv2d_depthwise_stride2_pad2_dilation2", conv,
     [r(1, 4, 9, 10), r(4, 1, 3, 3), r(4), [2, 2], [2, 2], [2, 2], False,
      [0, 0], 4])
case("conv1d_groups2_dilation2_nobias", conv,
     [r(2, 4, 11), r(6, 2, 3), None, [1], [2], [2], False, [0], 2])
case("conv2d_f64_groups3_stride2", conv,
     [r(2, 6, 7, 7, dtype=torch.float64), r(3, 2, 3, 3, dtype=torch.float64),
      r(3, dtype=torch.float64), [2, 2], [1, 1], [1, 1], False, [0, 0], 3])
case("conv2d_f16_depthwise", conv,
     [r(1, 3, 6, 6, dtype=torch.float16), r(3, 1, 3, 3, dtype=torch.float16),
      r(3, dtype=torch.float16), [1, 1], [1, 1], [1, 1], False, [0, 0], 3],
     compute=via_f32(conv, torch.float16))
case("conv2d_batch3_5x3_stride_2_1_pad_2_0", conv,
     [r(3, 3, 8, 7), r(4, 3, 5, 3), r(4), [2, 1], [2, 0], [1, 1], False,
      [0, 0], 1])

# Elementwise operators of the models, which take the dense-f32 fast path
# (runtime/host_kernels.cc) with dense inputs and the strided one with gapped
# inputs.
case("add_tensor_f32", aten.add.Tensor, [r(3, 5), r(3, 5), 1])
case("add_tensor_alpha_broadcast", aten.add.Tensor, [r(3, 5), r(5), 2])
case("add_scalar_f32", aten.add.Scalar, [r(4, 3), 0.5, 1])
case("mul_tensor_f32", aten.mul.Tensor, [r(2, 3, 4), r(2, 3, 4)])
case("relu_f32", aten.relu.default, [r(4, 6)])
case("relu_f64", aten.relu.default, [r(3, 3, dtype=torch.float64)])

# Max pool where windows hold NaNs (PyTorch takes every NaN it meets, so the
# index is the window's last NaN) and where a window is all -inf (the first
# element). Last in the file, so that the cases above keep their draws.
pool_x = r(1, 2, 4, 4)
for at in [(0, 0, 0, 0), (0, 0, 1, 0), (0, 0, 1, 1), (0, 0, 2, 3),
           (0, 1, 3, 3)]:
    pool_x[at] = float("nan")
pool_x[0, 1, 0:2, 0:2] = float("-inf")
case("max_pool_nan_and_minus_inf", mp, [pool_x, [2, 2], [2, 2], [0, 0],
                                        [1, 1], False])
case("max_pool_nan_and_minus_inf_f64", mp, [pool_x.double(), [2, 2], [2, 2],
                                            [0, 0], [1, 1], False])

# Max pool of f32 at the column strides the fast path compiles separately
# (runtime/host_kernels_reduce.cc, MaxPoolColumns: 1, 2, and any other read at
# run time), with ties (the first of equal maxima keeps the index, -0.0 and
# 0.0 included), NaNs and -inf windows, and planes wider than a vector.
tie_x = torch.round(r(1, 2, 6, 11) * 2) / 2
tie_x[0, 0, 1, 2] = -0.0
tie_x[0, 0, 1, 3] = 0.0
tie_x[0, 0, 2, 2:5] = -0.0
tie_x[0, 1, 3, 4] = float("nan")
tie_x[0, 1, 3, 6] = float("nan")
tie_x[0, 1, 0:2, 8:11] = float("-inf")
case("max_pool_f32_stride1_ties", mp, [tie_x, [3, 3], [1, 1], [1, 1],
                                       [1, 1], False])
case("max_pool_f32_stride3_ties", mp, [tie_x, [3, 3], [3, 3], [1, 1],
                                       [1, 1], True])
case("max_pool_f32_stride2_dilated", mp, [tie_x, [2, 3], [2, 2], [1, 1],
                                          [2, 2], False])

# Convolutions whose im2col takes the shifted-rows path (stride 1, output as
# wide as the input: runtime/ops/nn_conv.cc, Im2ColShiftedRow): a kernel wider
# than the plane, so that whole rows and columns of it fall in the padding,
# and a dilated one on a plane wider than a vector.
case("conv2d_5x5_pad2_on_3x3", conv,
     [r(2, 3, 3, 3), r(4, 3, 5, 5), r(4), [1, 1], [2, 2], [1, 1], False,
      [0, 0], 1])
case("conv2d_3x3_pad2_dilation2_wide", conv,
     [r(1, 2, 5, 19), r(3, 2, 3, 3), None, [1, 1], [2, 2], [2, 2], False,
      [0, 0], 1])

# Layer norm of f32 rows the fast path serves (runtime/host_kernels_reduce.cc,
# LayerNormRow: sums in eight partial lanes, then the rest one by one): rows
# of 20 over two normalized dims, a weight without a bias on rows of 19, and
# rows whose mean is far from their spread, where the variance is a small
# difference of large terms.
ln = aten.native_layer_norm.default
case("layer_norm_two_dims_tail", ln,
     [r(3, 2, 10), [2, 10], r(2, 10), r(2, 10), 1e-5])
case("layer_norm_weight_only", ln, [r(5, 19), [19], r(19), None, 1e-6])
case("layer_norm_far_from_zero", ln,
     [r(2, 33) + 10, [33], r(33), r(33), 1e-5])

# Attention with a key padding mask (mask_type 1, [B, S], true = masked
# out), different keys masked for each item (runtime/ops/embedding_attention.cc,
# SoftmaxInPlace after the mask). (A row with every key masked is left out:
# torch 1.13 gives NaN there, this kernel zeros.)
pad_mask = torch.tensor([[False, True, False], [True, False, True]])
case("mha_key_padding_mask", mha,
     [q, q, q, E, H] + mha_w + [pad_mask, True, False, 1])

print("# Generated by tests/runtime/gen_op_cases.py (torch %s); do not edit."
      % torch.__version__)
print("\n".join(lines))
