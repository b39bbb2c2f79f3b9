"""Golden graphs: the forward graph, backward graph and saved set fxremat produces for small
models, pinned with expecttest so that any change in plan shows up as a diff.

Regenerate after an intended change with ``EXPECTTEST_ACCEPT=1 python -m pytest tests/test_golden_graphs.py``.
The graphs are traced by torch 2.13; other versions name nodes differently, so the goldens are
only compared there.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from expecttest import TestCase
import pytest

import fxremat
from fxremat import _torch
from fxremat.backend import FxrematPartitioner

pytestmark = pytest.mark.skipif(
    not torch.__version__.startswith("2.13."), reason="goldens are traced with torch 2.13"
)


def _compact(gm: torch.fx.GraphModule) -> str:
    """One line per node: ``name = op(args)``; placeholders and the output on one line each."""
    lines = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        args = ", ".join(str(a) for a in node.args)
        if node.op == "output":
            lines.append(f"return {args}")
        else:
            target = getattr(node.target, "__name__", str(node.target))
            lines.append(f"{node.name} = {target}({args})")
    inputs = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    return "\n".join([f"inputs: {', '.join(inputs)}", *lines])


def plan_of(model: nn.Module, *inputs: torch.Tensor) -> str:
    """Compile ``model`` with fxremat (no Inductor) and print the saved set and both graphs."""
    from torch._dynamo.backends.common import aot_autograd

    graphs: list[torch.fx.GraphModule] = []

    def capture(gm, _inputs):
        graphs.append(gm)
        return _torch.boxed_freeing_call(gm)

    torch._dynamo.reset()
    fxremat.last_reports(clear=True)
    backend = aot_autograd(
        fw_compiler=capture, bw_compiler=capture, partition_fn=FxrematPartitioner(),
        decompositions=_torch.eager_decompositions(),
    )
    with _torch.caches_disabled():
        out = torch.compile(model, backend=backend)(*inputs)
        out.sum().backward()
    report = fxremat.last_reports()[-1]
    fw, bw = graphs
    header = f"chosen: {report.chosen}; stages: {report.stages}; checkpoints: {report.plan.checkpoints if report.plan else ()}"
    saved = [n.name for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    return "\n".join([header, f"saved: {', '.join(saved)}", "--- forward", _compact(fw), "--- backward", _compact(bw)])


class MLP(nn.Module):
    def __init__(self, width=16, depth=4):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


class ResidualBlocks(nn.Module):
    def __init__(self, channels=4, blocks=3):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(channels, channels, 3, padding=1, bias=False) for _ in range(2 * blocks))

    def forward(self, x):
        for i in range(0, len(self.convs), 2):
            x = torch.relu(x + self.convs[i + 1](torch.relu(self.convs[i](x))))
        return x


class TransformerBlocks(nn.Module):
    def __init__(self, d=8, heads=2, layers=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d, bias=False) for _ in range(layers))
        self.proj = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(layers))
        self.mlp = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(layers))

    def forward(self, x):
        b, t, d = x.shape
        for qkv, proj, mlp in zip(self.qkv, self.proj, self.mlp):
            q, k, v = qkv(F.layer_norm(x, (d,))).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + proj(att)
            x = x + F.gelu(mlp(x))
        return x


class TestGoldenGraphs(TestCase):
    def test_mlp(self):
        torch.manual_seed(0)
        self.assertExpectedInline(plan_of(MLP(), torch.randn(256, 16)), """\
chosen: fxremat; stages: 8; checkpoints: (4,)
saved: tanh_1, primals_3, primals_4, primals_6, primals_8, tanh_2, detach_4, primals_1, primals_2
--- forward
inputs: primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7, primals_8, primals_9
t = t.default(primals_1)
addmm = addmm.default(primals_2, primals_3, t)
tanh = tanh.default(addmm)
t_1 = t.default(primals_4)
addmm_1 = addmm.default(primals_5, tanh, t_1)
tanh_1 = tanh.default(addmm_1)
t_2 = t.default(primals_6)
addmm_2 = addmm.default(primals_7, tanh_1, t_2)
tanh_2 = tanh.default(addmm_2)
t_3 = t.default(primals_8)
addmm_3 = addmm.default(primals_9, tanh_2, t_3)
tanh_3 = tanh.default(addmm_3)
detach_3 = detach.default(tanh_3)
detach_4 = detach.default(detach_3)
return (tanh_3, tanh_1, primals_3, primals_4, primals_6, primals_8, tanh_2, detach_4, primals_1, primals_2)
--- backward
inputs: tanh_1, primals_3, primals_4, primals_6, primals_8, tanh_2, detach_4, primals_1, primals_2, tangents_1
tanh_backward = tanh_backward.default(tangents_1, detach_4)
t_3 = t.default(primals_8)
t_4 = t.default(t_3)
mm = mm.default(tanh_backward, t_4)
t_5 = t.default(tanh_backward)
mm_1 = mm.default(t_5, tanh_2)
t_6 = t.default(mm_1)
sum_1 = sum.dim_IntList(tanh_backward, [0], True)
view = view.default(sum_1, [16])
t_7 = t.default(t_6)
detach_2 = detach.default(tanh_2)
detach_5 = detach.default(detach_2)
tanh_backward_1 = tanh_backward.default(mm, detach_5)
t_2 = t.default(primals_6)
t_8 = t.default(t_2)
mm_2 = mm.default(tanh_backward_1, t_8)
t_9 = t.default(tanh_backward_1)
mm_3 = mm.default(t_9, tanh_1)
t_10 = t.default(mm_3)
sum_2 = sum.dim_IntList(tanh_backward_1, [0], True)
view_1 = view.default(sum_2, [16])
t_11 = t.default(t_10)
detach_1 = detach.default(tanh_1)
detach_6 = detach.default(detach_1)
tanh_backward_2 = tanh_backward.default(mm_2, detach_6)
t_1 = t.default(primals_4)
t_12 = t.default(t_1)
mm_4 = mm.default(tanh_backward_2, t_12)
t_13 = t.default(tanh_backward_2)
t = t.default(primals_1)
addmm = addmm.default(primals_2, primals_3, t)
tanh = tanh.default(addmm)
mm_5 = mm.default(t_13, tanh)
t_14 = t.default(mm_5)
sum_3 = sum.dim_IntList(tanh_backward_2, [0], True)
view_2 = view.default(sum_3, [16])
t_15 = t.default(t_14)
detach = detach.default(tanh)
detach_7 = detach.default(detach)
tanh_backward_3 = tanh_backward.default(mm_4, detach_7)
t_16 = t.default(tanh_backward_3)
mm_6 = mm.default(t_16, primals_3)
t_17 = t.default(mm_6)
sum_4 = sum.dim_IntList(tanh_backward_3, [0], True)
view_3 = view.default(sum_4, [16])
t_18 = t.default(t_17)
return (t_18, view_3, None, t_15, view_2, t_11, view_1, t_7, view)""")

    def test_residual_cnn(self):
        torch.manual_seed(0)
        self.assertExpectedInline(plan_of(ResidualBlocks(), torch.randn(2, 4, 16, 16)), """\
chosen: fxremat; stages: 9; checkpoints: (5, 7)
saved: relu_1, relu_3, primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7, relu_4, detach_6
--- forward
inputs: primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7
convolution = convolution.default(primals_2, primals_1, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
relu = relu.default(convolution)
convolution_1 = convolution.default(relu, primals_3, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
add = add.Tensor(primals_2, convolution_1)
relu_1 = relu.default(add)
convolution_2 = convolution.default(relu_1, primals_4, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
relu_2 = relu.default(convolution_2)
convolution_3 = convolution.default(relu_2, primals_5, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
add_1 = add.Tensor(relu_1, convolution_3)
relu_3 = relu.default(add_1)
convolution_4 = convolution.default(relu_3, primals_6, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
relu_4 = relu.default(convolution_4)
convolution_5 = convolution.default(relu_4, primals_7, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
add_2 = add.Tensor(relu_3, convolution_5)
relu_5 = relu.default(add_2)
detach_5 = detach.default(relu_5)
detach_6 = detach.default(detach_5)
return (relu_5, relu_1, relu_3, primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7, relu_4, detach_6)
--- backward
inputs: relu_1, relu_3, primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7, relu_4, detach_6, tangents_1
threshold_backward = threshold_backward.default(tangents_1, detach_6, 0)
convolution_backward = convolution_backward.default(threshold_backward, relu_4, primals_7, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
getitem = getitem(convolution_backward, 0)
getitem_1 = getitem(convolution_backward, 1)
detach_4 = detach.default(relu_4)
detach_7 = detach.default(detach_4)
threshold_backward_1 = threshold_backward.default(getitem, detach_7, 0)
convolution_backward_1 = convolution_backward.default(threshold_backward_1, relu_3, primals_6, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
getitem_3 = getitem(convolution_backward_1, 0)
getitem_4 = getitem(convolution_backward_1, 1)
add_3 = add.Tensor(threshold_backward, getitem_3)
detach_3 = detach.default(relu_3)
detach_8 = detach.default(detach_3)
threshold_backward_2 = threshold_backward.default(add_3, detach_8, 0)
convolution_2 = convolution.default(relu_1, primals_4, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
relu_2 = relu.default(convolution_2)
convolution_backward_2 = convolution_backward.default(threshold_backward_2, relu_2, primals_5, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
getitem_6 = getitem(convolution_backward_2, 0)
getitem_7 = getitem(convolution_backward_2, 1)
detach_2 = detach.default(relu_2)
detach_9 = detach.default(detach_2)
threshold_backward_3 = threshold_backward.default(getitem_6, detach_9, 0)
convolution_backward_3 = convolution_backward.default(threshold_backward_3, relu_1, primals_4, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
getitem_9 = getitem(convolution_backward_3, 0)
getitem_10 = getitem(convolution_backward_3, 1)
add_4 = add.Tensor(threshold_backward_2, getitem_9)
detach_1 = detach.default(relu_1)
detach_10 = detach.default(detach_1)
threshold_backward_4 = threshold_backward.default(add_4, detach_10, 0)
convolution = convolution.default(primals_2, primals_1, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
relu = relu.default(convolution)
convolution_backward_4 = convolution_backward.default(threshold_backward_4, relu, primals_3, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
getitem_12 = getitem(convolution_backward_4, 0)
getitem_13 = getitem(convolution_backward_4, 1)
detach = detach.default(relu)
detach_11 = detach.default(detach)
threshold_backward_5 = threshold_backward.default(getitem_12, detach_11, 0)
convolution_backward_5 = convolution_backward.default(threshold_backward_5, primals_2, primals_1, [0], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, False])
getitem_16 = getitem(convolution_backward_5, 1)
return (getitem_16, None, getitem_13, getitem_10, getitem_7, getitem_4, getitem_1)""")

    def test_transformer(self):
        torch.manual_seed(0)
        self.assertExpectedInline(plan_of(TransformerBlocks(), torch.randn(4, 64, 8)), """\
chosen: fxremat; stages: 11; checkpoints: (1, 5, 6)
saved: add_1, getitem, add, getitem_5, primals_3, primals_4, primals_5, primals_6, primals_7, select_3, select_4, select_5, getitem_9, view_8, view_9, mm_5, detach_2, primals_2
--- forward
inputs: primals_1, primals_2, primals_3, primals_4, primals_5, primals_6, primals_7
native_layer_norm = native_layer_norm.default(primals_1, [8], None, None, 1e-05)
getitem = getitem(native_layer_norm, 0)
t = t.default(primals_2)
view = view.default(getitem, [256, 8])
mm = mm.default(view, t)
_unsafe_view = _unsafe_view.default(mm, [4, 64, 24])
view_1 = view.default(_unsafe_view, [4, 64, 3, 2, 4])
permute = permute.default(view_1, [2, 0, 3, 1, 4])
select = select.int(permute, 0, 0)
select_1 = select.int(permute, 0, 1)
select_2 = select.int(permute, 0, 2)
_scaled_dot_product_flash_attention_for_cpu = _scaled_dot_product_flash_attention_for_cpu.default(select, select_1, select_2, 0.0, True)
getitem_3 = getitem(_scaled_dot_product_flash_attention_for_cpu, 0)
transpose = transpose.int(getitem_3, 1, 2)
view_2 = view.default(transpose, [4, 64, 8])
t_1 = t.default(primals_3)
view_3 = view.default(view_2, [256, 8])
mm_1 = mm.default(view_3, t_1)
_unsafe_view_1 = _unsafe_view.default(mm_1, [4, 64, 8])
add = add.Tensor(primals_1, _unsafe_view_1)
t_2 = t.default(primals_4)
view_4 = view.default(add, [256, 8])
mm_2 = mm.default(view_4, t_2)
_unsafe_view_2 = _unsafe_view.default(mm_2, [4, 64, 8])
gelu = gelu.default(_unsafe_view_2)
add_1 = add.Tensor(add, gelu)
native_layer_norm_1 = native_layer_norm.default(add_1, [8], None, None, 1e-05)
getitem_5 = getitem(native_layer_norm_1, 0)
t_3 = t.default(primals_5)
view_5 = view.default(getitem_5, [256, 8])
mm_3 = mm.default(view_5, t_3)
_unsafe_view_3 = _unsafe_view.default(mm_3, [4, 64, 24])
view_6 = view.default(_unsafe_view_3, [4, 64, 3, 2, 4])
permute_1 = permute.default(view_6, [2, 0, 3, 1, 4])
select_3 = select.int(permute_1, 0, 0)
select_4 = select.int(permute_1, 0, 1)
select_5 = select.int(permute_1, 0, 2)
_scaled_dot_product_flash_attention_for_cpu_1 = _scaled_dot_product_flash_attention_for_cpu.default(select_3, select_4, select_5, 0.0, True)
getitem_8 = getitem(_scaled_dot_product_flash_attention_for_cpu_1, 0)
getitem_9 = getitem(_scaled_dot_product_flash_attention_for_cpu_1, 1)
detach_1 = detach.default(getitem_8)
transpose_1 = transpose.int(getitem_8, 1, 2)
view_7 = view.default(transpose_1, [4, 64, 8])
t_4 = t.default(primals_6)
view_8 = view.default(view_7, [256, 8])
mm_4 = mm.default(view_8, t_4)
_unsafe_view_4 = _unsafe_view.default(mm_4, [4, 64, 8])
add_2 = add.Tensor(add_1, _unsafe_view_4)
t_5 = t.default(primals_7)
view_9 = view.default(add_2, [256, 8])
mm_5 = mm.default(view_9, t_5)
_unsafe_view_5 = _unsafe_view.default(mm_5, [4, 64, 8])
gelu_1 = gelu.default(_unsafe_view_5)
add_3 = add.Tensor(add_2, gelu_1)
detach_2 = detach.default(detach_1)
return (add_3, add_1, getitem, add, getitem_5, primals_3, primals_4, primals_5, primals_6, primals_7, select_3, select_4, select_5, getitem_9, view_8, view_9, mm_5, detach_2, primals_2)
--- backward
inputs: add_1, getitem, add, getitem_5, primals_3, primals_4, primals_5, primals_6, primals_7, select_3, select_4, select_5, getitem_9, view_8, view_9, mm_5, detach_2, primals_2, tangents_1
_unsafe_view_5 = _unsafe_view.default(mm_5, [4, 64, 8])
gelu_backward = gelu_backward.default(tangents_1, _unsafe_view_5)
view_10 = view.default(gelu_backward, [256, 8])
t_6 = t.default(view_10)
mm_6 = mm.default(t_6, view_9)
t_7 = t.default(mm_6)
t_5 = t.default(primals_7)
t_8 = t.default(t_5)
mm_7 = mm.default(view_10, t_8)
view_11 = view.default(mm_7, [4, 64, 8])
add_4 = add.Tensor(tangents_1, view_11)
t_9 = t.default(t_7)
view_12 = view.default(add_4, [256, 8])
t_10 = t.default(view_12)
mm_8 = mm.default(t_10, view_8)
t_11 = t.default(mm_8)
t_4 = t.default(primals_6)
t_12 = t.default(t_4)
mm_9 = mm.default(view_12, t_12)
view_13 = view.default(mm_9, [4, 64, 8])
t_13 = t.default(t_11)
view_14 = view.default(view_13, [4, 64, 2, 4])
transpose_2 = transpose.int(view_14, 1, 2)
_scaled_dot_product_flash_attention_for_cpu_backward = _scaled_dot_product_flash_attention_for_cpu_backward.default(transpose_2, select_3, select_4, select_5, detach_2, getitem_9, 0.0, True)
getitem_10 = getitem(_scaled_dot_product_flash_attention_for_cpu_backward, 0)
getitem_11 = getitem(_scaled_dot_product_flash_attention_for_cpu_backward, 1)
getitem_12 = getitem(_scaled_dot_product_flash_attention_for_cpu_backward, 2)
select_backward = select_backward.default(getitem_12, [3, 4, 2, 64, 4], 0, 2)
select_backward_1 = select_backward.default(getitem_11, [3, 4, 2, 64, 4], 0, 1)
add_5 = add.Tensor(select_backward, select_backward_1)
select_backward_2 = select_backward.default(getitem_10, [3, 4, 2, 64, 4], 0, 0)
add_6 = add.Tensor(add_5, select_backward_2)
permute_2 = permute.default(add_6, [1, 3, 0, 2, 4])
clone = clone.default(permute_2)
_unsafe_view_6 = _unsafe_view.default(clone, [4, 64, 24])
view_15 = view.default(_unsafe_view_6, [256, 24])
t_14 = t.default(view_15)
view_5 = view.default(getitem_5, [256, 8])
mm_10 = mm.default(t_14, view_5)
t_15 = t.default(mm_10)
t_3 = t.default(primals_5)
t_16 = t.default(t_3)
mm_11 = mm.default(view_15, t_16)
view_16 = view.default(mm_11, [4, 64, 8])
t_17 = t.default(t_15)
native_layer_norm_1 = native_layer_norm.default(add_1, [8], None, None, 1e-05)
getitem_6 = getitem(native_layer_norm_1, 1)
getitem_7 = getitem(native_layer_norm_1, 2)
native_layer_norm_backward = native_layer_norm_backward.default(view_16, add_1, [8], getitem_6, getitem_7, None, None, [True, False, False])
getitem_13 = getitem(native_layer_norm_backward, 0)
add_7 = add.Tensor(add_4, getitem_13)
view_4 = view.default(add, [256, 8])
t_2 = t.default(primals_4)
mm_2 = mm.default(view_4, t_2)
_unsafe_view_2 = _unsafe_view.default(mm_2, [4, 64, 8])
gelu_backward_1 = gelu_backward.default(add_7, _unsafe_view_2)
view_17 = view.default(gelu_backward_1, [256, 8])
t_18 = t.default(view_17)
mm_12 = mm.default(t_18, view_4)
t_19 = t.default(mm_12)
t_20 = t.default(t_2)
mm_13 = mm.default(view_17, t_20)
view_18 = view.default(mm_13, [4, 64, 8])
add_8 = add.Tensor(add_7, view_18)
t_21 = t.default(t_19)
view_19 = view.default(add_8, [256, 8])
t_22 = t.default(view_19)
view = view.default(getitem, [256, 8])
t = t.default(primals_2)
mm = mm.default(view, t)
_unsafe_view = _unsafe_view.default(mm, [4, 64, 24])
view_1 = view.default(_unsafe_view, [4, 64, 3, 2, 4])
permute = permute.default(view_1, [2, 0, 3, 1, 4])
select = select.int(permute, 0, 0)
select_1 = select.int(permute, 0, 1)
select_2 = select.int(permute, 0, 2)
_scaled_dot_product_flash_attention_for_cpu = _scaled_dot_product_flash_attention_for_cpu.default(select, select_1, select_2, 0.0, True)
getitem_3 = getitem(_scaled_dot_product_flash_attention_for_cpu, 0)
transpose = transpose.int(getitem_3, 1, 2)
view_2 = view.default(transpose, [4, 64, 8])
view_3 = view.default(view_2, [256, 8])
mm_14 = mm.default(t_22, view_3)
t_23 = t.default(mm_14)
t_1 = t.default(primals_3)
t_24 = t.default(t_1)
mm_15 = mm.default(view_19, t_24)
view_20 = view.default(mm_15, [4, 64, 8])
t_25 = t.default(t_23)
view_21 = view.default(view_20, [4, 64, 2, 4])
transpose_3 = transpose.int(view_21, 1, 2)
detach = detach.default(getitem_3)
detach_3 = detach.default(detach)
getitem_4 = getitem(_scaled_dot_product_flash_attention_for_cpu, 1)
_scaled_dot_product_flash_attention_for_cpu_backward_1 = _scaled_dot_product_flash_attention_for_cpu_backward.default(transpose_3, select, select_1, select_2, detach_3, getitem_4, 0.0, True)
getitem_16 = getitem(_scaled_dot_product_flash_attention_for_cpu_backward_1, 0)
getitem_17 = getitem(_scaled_dot_product_flash_attention_for_cpu_backward_1, 1)
getitem_18 = getitem(_scaled_dot_product_flash_attention_for_cpu_backward_1, 2)
select_backward_3 = select_backward.default(getitem_18, [3, 4, 2, 64, 4], 0, 2)
select_backward_4 = select_backward.default(getitem_17, [3, 4, 2, 64, 4], 0, 1)
add_9 = add.Tensor(select_backward_3, select_backward_4)
select_backward_5 = select_backward.default(getitem_16, [3, 4, 2, 64, 4], 0, 0)
add_10 = add.Tensor(add_9, select_backward_5)
permute_3 = permute.default(add_10, [1, 3, 0, 2, 4])
clone_1 = clone.default(permute_3)
_unsafe_view_7 = _unsafe_view.default(clone_1, [4, 64, 24])
view_22 = view.default(_unsafe_view_7, [256, 24])
t_26 = t.default(view_22)
mm_16 = mm.default(t_26, view)
t_27 = t.default(mm_16)
t_28 = t.default(t_27)
return (None, t_28, t_25, t_21, t_17, t_13, t_9)""")
