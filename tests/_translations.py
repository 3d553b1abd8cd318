"""ONNX translations of model pieces that have no program for every size, written as a user of
``to_onnx(translations=...)`` writes them (docs/onnx.md, "What cannot be written"), for the tests and
bench/families.py.

Jamba's Mamba mixer computes its selective scan, on CPU, with a Python loop over the sequence: torch.export unrolls
it, so the piece gets a program per length (docs/onnx.md, "Programs by size") and the ONNX file refuses lengths no
example had. Its translation writes the loop as an ONNX ``Loop`` (onnxscript turns a ``for`` over a tensor's size
into one), so the file takes every length. A translation takes the piece operator's ``(tensors, weights, call)``:
its flat tensors, its weights (parameters and buffers) in the module's ``state_dict`` order, and its call string; it returns the list
of the flat outputs.
"""

from __future__ import annotations

from typing import Any

import onnxscript
from onnxscript import FLOAT
from onnxscript import opset18 as op


@onnxscript.script()
def selective_scan(state: FLOAT[...], decay: FLOAT[...], drive: FLOAT[...], c: FLOAT[...]) -> FLOAT[...]:
    """Mamba's recurrence, one position at a time, as transformers' reference loop computes it: ``state =
    decay[t] * state + drive[t]``, then ``y[t] = state @ c[t]``. ``decay`` and ``drive`` are (seq, batch, inner,
    n), ``c`` (seq, batch, n), ``state`` (batch, inner, n); returns ``y``, (seq, batch, inner)."""
    last = op.Constant(value_ints=[-1])
    ys = op.SequenceEmpty(dtype=1)
    for t in range(op.Squeeze(op.Shape(decay, start=0, end=1))):
        state = op.Add(op.Mul(op.Gather(decay, t, axis=0), state), op.Gather(drive, t, axis=0))
        ys = op.SequenceInsert(ys, op.Squeeze(op.MatMul(state, op.Unsqueeze(op.Gather(c, t, axis=0), last)), last))
    return op.ConcatFromSequence(ys, axis=0, new_axis=1)


def jamba_mamba_mixer(tensors: list[Any], weights: list[Any], call: str) -> list[Any]:
    """``JambaMambaMixer.forward`` without a cache (a prefill, ``use_cache=False``), in ONNX: the masked input
    projected, its causal depthwise convolution, the selective scan's inputs (with Jamba's RMS norms on the time
    step, B and C) and the scan, the skip and the gate, the output projection."""
    (x, mask), (a_log, d, conv_w, conv_b, in_w, x_w, dt_w, dt_b, out_w, dt_norm, b_norm, c_norm) = tensors, weights

    def ints(*values: int) -> Any:
        return op.Constant(value_ints=list(values))

    def rms(t: Any, weight: Any) -> Any:  # JambaRMSNorm, eps 1e-6
        variance = op.ReduceMean(op.Mul(t, t), ints(-1), keepdims=1)
        return op.Mul(weight, op.Div(t, op.Sqrt(op.Add(variance, op.CastLike(op.Constant(value_float=1e-6), t)))))

    def silu(t: Any) -> Any:
        return op.Mul(t, op.Sigmoid(t))

    def linear(t: Any, weight: Any) -> Any:
        return op.MatMul(t, op.Transpose(weight, perm=[1, 0]))

    keep = op.Unsqueeze(op.CastLike(mask, x), ints(2))  # padding positions tuned out, as eager does
    projected = op.Transpose(linear(op.Mul(x, keep), in_w), perm=[0, 2, 1])  # (batch, 2 inner, seq)
    u, gate = op.Split(projected, axis=1, num_outputs=2)
    before = op.Sub(op.Shape(conv_w, start=2, end=3), ints(1))  # kernel - 1 zeros before the sequence: causal
    u = op.Pad(u, op.Concat(ints(0, 0), before, ints(0, 0, 0), axis=0))
    u = silu(op.Conv(u, conv_w, conv_b, group=conv_w.shape[0]))
    u = op.Mul(op.Transpose(u, perm=[0, 2, 1]), keep)  # (batch, seq, inner)
    rank, n = op.Shape(dt_w, start=1, end=2), op.Shape(a_log, start=1, end=2)
    z, two = linear(u, x_w), ints(2)
    step = rms(op.Slice(z, ints(0), rank, two), dt_norm)
    b = rms(op.Slice(z, rank, op.Add(rank, n), two), b_norm)
    c = rms(op.Slice(z, op.Add(rank, n), op.Add(rank, op.Add(n, n)), two), c_norm)
    dt = op.Unsqueeze(op.Softplus(op.Add(linear(step, dt_w), dt_b)), ints(3))  # (batch, seq, inner, 1)
    decay = op.Exp(op.Mul(dt, op.Neg(op.Exp(a_log))))  # (batch, seq, inner, n)
    drive = op.Mul(op.Mul(dt, op.Unsqueeze(b, two)), op.Unsqueeze(u, ints(3)))
    state = op.Expand(op.CastLike(op.Constant(value_float=0.0), x), op.Concat(op.Shape(x, start=0, end=1), op.Shape(a_log), axis=0))
    seq_first = [1, 0, 2, 3]  # (seq, batch, ...): the loop runs over the first axis
    y = selective_scan(state, op.Transpose(decay, perm=seq_first), op.Transpose(drive, perm=seq_first), op.Transpose(c, perm=[1, 0, 2]))
    y = op.Add(op.Transpose(y, perm=[1, 0, 2]), op.Mul(u, d))  # the D skip
    return [linear(op.Mul(y, silu(op.Transpose(gate, perm=[0, 2, 1]))), out_w)]


@onnxscript.script()
def decayed_linear_attention(state: FLOAT[...], ratio: FLOAT[...], q: FLOAT[...], k: FLOAT[...], v: FLOAT[...]) -> tuple[FLOAT[...], FLOAT[...]]:
    """Linear attention with a decay per head, one position at a time, as MiniMax's decode step computes it:
    ``state = ratio * state + k[t]ᵀ v[t]``, then ``y[t] = q[t] @ state``. ``q``, ``k`` and ``v`` are (seq, batch,
    heads, 1, dim), ``state`` (batch, heads, dim, dim), ``ratio`` (heads, 1, 1); returns ``y``, (seq, batch, heads,
    1, dim), and the last state."""
    ys = op.SequenceEmpty(dtype=1)
    for t in range(op.Squeeze(op.Shape(q, start=0, end=1))):
        kt = op.Gather(k, t, axis=0)
        state = op.Add(op.Mul(ratio, state), op.MatMul(op.Transpose(kt, perm=[0, 1, 3, 2]), op.Gather(v, t, axis=0)))
        ys = op.SequenceInsert(ys, op.MatMul(op.Gather(q, t, axis=0), state))
    return op.ConcatFromSequence(ys, axis=0, new_axis=1), state


def minimax_lightning_attention(tensors: list[Any], weights: list[Any], call: str) -> list[Any]:
    """``MiniMaxLightningAttention.forward`` without a cache (a prefill), in ONNX: the same sums as its loop over
    blocks of positions, taken one position at a time (its decode step's form), so every length is one loop.
    Its tensors are the hidden states, the rotary cosines and sines (unused), the 2-D attention mask and the
    positions; its weights its buffers (the decay rates first), then its parameters."""
    x, mask = tensors[0], tensors[3]
    slope, norm, qkv_w, out_w, gate_w = weights[0], *weights[4:]

    def ints(*values: int) -> Any:
        return op.Constant(value_ints=list(values))

    def linear(t: Any, weight: Any) -> Any:
        return op.MatMul(t, op.Transpose(weight, perm=[1, 0]))

    qkv = linear(x, qkv_w)
    qkv = op.Mul(op.Mul(qkv, op.Sigmoid(qkv)), op.Unsqueeze(op.CastLike(mask, x), ints(2)))  # SiLU, padding tuned out
    heads = op.Shape(slope, start=0, end=1)
    batch_seq = op.Shape(x, start=0, end=2)
    qkv = op.Reshape(qkv, op.Concat(batch_seq, heads, ints(1, -1), axis=0))  # (batch, seq, heads, 1, 3 dim)
    q, k, v = op.Split(op.Transpose(qkv, perm=[1, 0, 2, 3, 4]), axis=4, num_outputs=3)  # each (seq, batch, heads, 1, dim)
    dim = op.Shape(q, start=4, end=5)
    state = op.Expand(op.CastLike(op.Constant(value_float=0.0), x), op.Concat(op.Shape(x, start=0, end=1), heads, dim, dim, axis=0))
    ys, state = decayed_linear_attention(state, op.Exp(op.Neg(slope)), q, k, v)
    y = op.Reshape(op.Transpose(ys, perm=[1, 0, 2, 3, 4]), op.Concat(batch_seq, ints(-1), axis=0))  # (batch, seq, heads dim)
    variance = op.ReduceMean(op.Mul(y, y), ints(-1), keepdims=1)  # MiniMaxRMSNorm, eps 1e-6
    y = op.Mul(norm, op.Div(y, op.Sqrt(op.Add(variance, op.CastLike(op.Constant(value_float=1e-6), y)))))
    return [linear(op.Mul(op.Sigmoid(linear(x, gate_w)), y), out_w), state]
