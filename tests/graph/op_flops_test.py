"""Tests for tfplace.graph.op_flops: counts worked out by hand."""

import pytest

from tfplace.graph.op_flops import (einsum_is_batched, einsum_transposes,
                                    matrix_products, num_elements, op_flops)


def _attrs(**kw):
  return kw.get


def test_matmul_and_transpose():
  # [4,6] x [6,2]: 4*2 outputs, 6 multiply-adds each.
  assert op_flops("MatMul", [(4, 6), (6, 2)], [(4, 2)], _attrs()) == 96
  # transpose_a: a is [6,4], K = 6.
  assert op_flops("MatMul", [(6, 4), (6, 2)], [(4, 2)],
                  _attrs(transpose_a=True)) == 96


def test_batch_matmul():
  assert op_flops("BatchMatMulV2", [(3, 4, 5), (3, 5, 2)], [(3, 4, 2)]) == (
      2 * 3 * 4 * 2 * 5)


@pytest.mark.parametrize("equation, ins, out, expected", [
    # Keras EinsumDense: [8,16,32] x [32,4,8] -> [8,16,4,8], K = 32.
    ("abc,cde->abde", [(8, 16, 32), (32, 4, 8)], (8, 16, 4, 8),
     2 * 8 * 16 * 4 * 8 * 32),
    # Attention scores: key [8,16,4,8] . query [8,16,4,8] -> [8,4,16,16].
    (b"aecd,abcd->acbe", [(8, 16, 4, 8), (8, 16, 4, 8)], (8, 4, 16, 16),
     2 * 8 * 4 * 16 * 16 * 8),
    # A batch matmul with an ellipsis, as BatchMatMul counts it.
    ("...ij,...jk->...ik", [(3, 4, 5), (3, 5, 2)], (3, 4, 2), 2 * 3 * 4 * 2 * 5),
    ("ij->ji", [(4, 6)], (6, 4), 0),      # a transpose
    ("ij->i", [(4, 6)], (4,), 24),        # a reduction
    ("ij,jk", [(4, 6), (6, 2)], (4, 2), 0),  # implicit output: not costed
])
def test_einsum(equation, ins, out, expected):
  assert op_flops("Einsum", ins, [out], _attrs(equation=equation)) == expected


@pytest.mark.parametrize("equation,batched", [
    ("abc,cde->abde", False),     # a projection: one large product
    ("aecd,abcd->acbe", True),    # attention scores: batch a, c
    ("acbe,aecd->abcd", True),    # attention context
    ("abde,abc->cde", False),     # a projection's weight gradient
    ("...ij,...jk->...ik", True),  # broadcast batch
    ("ij->ji", False), ("ij,jk", False),
])
def test_einsum_is_batched(equation, batched):
  assert einsum_is_batched(equation) == batched


@pytest.mark.parametrize("op_type,out,equation,products", [
    ("BatchMatMulV2", (8, 4, 32, 16), "", 32),   # batch 8 x heads 4
    ("BatchMatMul", (32, 16), "", 1),            # no batch dims
    ("MatMul", (64, 16), "", 1),
    ("Einsum", (16, 4, 32, 32), "aecd,abcd->acbe", 64),  # batch a, c
    ("Einsum", (16, 32, 4, 16), "acbe,aecd->abcd", 64),
    ("Einsum", (16, 32, 4, 16), "abc,cde->abde", 1),     # a projection
    ("Einsum", (2, 3, 4, 5), "...ij,...jk->...ik", 6),   # broadcast batch
    ("Einsum", (7, 2, 4, 5), "b...ij,b...jk->b...ik", 14),
    ("Einsum", (6, 4), "ij->ji", 1),                     # one input
    ("Einsum", (4, 2), "ij,jk", 1),                      # implicit output
])
def test_matrix_products(op_type, out, equation, products):
  assert matrix_products(op_type, out, equation) == products


# key / query / value [a=2, seq 6 or 5, heads 3, depth 4], scores
# [2, 3, 6, 5]: (elements copied keeping the last dim, moving it).
@pytest.mark.parametrize("equation, ins, out, moved", [
    # Keras attention's scores: key and query reordered to batch (a, c),
    # free, contracted (d stays last); the product [a, c, e, b] reordered
    # to [a, c, b, e] (the last dim moves).
    ("aecd,abcd->acbe", [(2, 5, 3, 4), (2, 6, 3, 4)], (2, 3, 6, 5),
     (120 + 144, 180)),
    # Its context: the value reordered to [a, c, d, e] (d moves), the
    # product [a, c, b, d] to [a, b, c, d] (d stays last).
    ("acbe,aecd->abcd", [(2, 3, 6, 5), (2, 5, 3, 4)], (2, 6, 3, 4),
     (144, 120)),
    # The scores' query gradient: both inputs reordered, d stays last.
    ("abcd,aecd->acbe", [(2, 6, 3, 4), (2, 5, 3, 4)], (2, 3, 6, 5),
     (144 + 120, 0)),
    # The key gradient: the first input's d and the product's move; the
    # second input is already batch, contracted, free (the matmul
    # transposes it).
    ("abcd,acbe->aecd", [(2, 6, 3, 4), (2, 3, 6, 5)], (2, 5, 3, 4),
     (0, 144 + 120)),
    # A projection, a batch matmul and a broadcast one: nothing copied.
    ("abc,cde->abde", [(2, 6, 8), (8, 3, 4)], (2, 6, 3, 4), (0, 0)),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], (2, 3, 5), (0, 0)),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)], (2, 3, 5), (0, 0)),
    # One input: a transpose copies its result; a reduction over a middle
    # dim first moves it last.
    ("ij->ji", [(3, 4)], (4, 3), (0, 12)),
    ("ijk->ik", [(3, 4, 5)], (3, 5), (0, 60)),
    ("ij,jk", [(4, 6), (6, 2)], (4, 2), (0, 0)),  # implicit output
])
def test_einsum_transposes(equation, ins, out, moved):
  assert einsum_transposes(equation, ins, out) == moved


def test_conv2d_and_backprops_match_forward():
  x, f, y = (1, 8, 8, 3), (3, 3, 3, 16), (1, 8, 8, 16)
  forward = 2 * 8 * 8 * 16 * 3 * 3 * 3
  assert op_flops("Conv2D", [x, f], [y]) == forward
  assert op_flops("Conv2DBackpropInput", [(4,), f, y], [x]) == forward
  assert op_flops("Conv2DBackpropFilter", [x, (4,), y], [f]) == forward


def test_conv3d_and_backprops_match_forward_and_pool3d():
  x, f, y = (2, 6, 8, 8, 3), (3, 3, 3, 3, 4), (2, 4, 6, 6, 4)
  forward = 2 * (2 * 4 * 6 * 6 * 4) * (3 * 3 * 3 * 3)
  assert op_flops("Conv3D", [x, f], [y]) == forward
  assert op_flops("Conv3DBackpropInputV2", [(5,), f, y], [x]) == forward
  assert op_flops("Conv3DBackpropFilterV2", [x, (5,), y], [f]) == forward
  assert op_flops("MaxPool3D", [y], [(2, 2, 3, 3, 4)],
                  _attrs(ksize=[1, 2, 2, 2, 1])) == 2 * 2 * 3 * 3 * 4 * 8
  # A fused conv (grappler's remapping) counts as its convolution.
  assert op_flops("_FusedConv2D", [(1, 8, 8, 3), (3, 3, 3, 16), (16,)],
                  [(1, 8, 8, 16)]) == 2 * 8 * 8 * 16 * 27


def test_depthwise_and_pool():
  assert op_flops("DepthwiseConv2dNative", [(1, 4, 4, 2), (3, 3, 2, 1)],
                  [(1, 4, 4, 2)]) == 2 * 32 * 9
  assert op_flops("MaxPool", [(1, 4, 4, 2)], [(1, 2, 2, 2)],
                  _attrs(ksize=[1, 2, 2, 1])) == 8 * 4


@pytest.mark.parametrize("op_type,expected", [
    ("Relu", 12), ("AddV2", 12), ("Sum", 24), ("Softmax", 5 * 24),
    ("Identity", 0), ("Reshape", 0), ("SomeUnknownOp", 0), ("AddN", 24)])
def test_elementwise_reductions_and_movement(op_type, expected):
  ins = [(4, 6), (4, 6), (4, 6)] if op_type == "AddN" else [(4, 6)]
  outs = [(2, 6)] if op_type == "Sum" else [(4, 3)]
  if op_type in ("Softmax", "Identity", "Reshape", "SomeUnknownOp", "AddN"):
    outs = [(4, 6)] if op_type != "Relu" else outs
  if op_type == "AddN":
    expected = 24 * 2
  assert op_flops(op_type, ins, outs) == expected


def test_num_elements_scalar():
  assert num_elements(()) == 1
  assert num_elements((2, 0)) == 0
