"""Writes cases.json for TestVisionGoldens: the vision ops (Conv,
ConvTranspose, the pools, MaxUnpool, Resize, GridSample, AffineGrid,
Col2Im, DFT, STFT) on seeded random float64 inputs with the results of
PyTorch's own functions (torch.nn.functional, torch.fft, torch.stft) in
float64, and RoiAlign, DeformConv and NonMaxSuppression, which PyTorch
lacks without torchvision, and antialiased Resize, which PyTorch defines
differently, with ONNX Runtime's results.

Run with the reference virtualenv (torch 2.15, onnx, onnxruntime 1.31):
    ~/.cache/attnrun/venv/bin/python gen.py
"""
import json

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

torch.manual_seed(7)
rng = np.random.default_rng(7)
torch.set_default_dtype(torch.float64)

CASES = []


def t(shape, lo=-1.0, hi=1.0):
    return torch.tensor(rng.uniform(lo, hi, shape))


def enc(x):
    if x is None:
        return None
    a = x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    dtype = str(a.dtype)
    return {"dtype": dtype, "shape": list(a.shape), "data": [float(v) if dtype.startswith("float") else int(v) for v in a.ravel()]}


def attr(v):
    if isinstance(v, str):
        return {"s": v}
    if isinstance(v, float):
        return {"f": v}
    if isinstance(v, int):
        return {"i": v}
    if all(isinstance(e, int) for e in v):
        return {"ints": list(v)}
    return {"floats": [float(e) for e in v]}


def case(name, op, opset, inputs, outputs, tol32=True, **attrs):
    CASES.append({"name": name, "op": op, "opset": opset, "attrs": {k: attr(v) for k, v in attrs.items()},
                  "inputs": [enc(x) for x in inputs], "outputs": [enc(y) for y in outputs], "tol32": tol32})


def conv_cases():
    x, w = t((1, 1, 5, 5)), t((1, 1, 3, 3))
    case("conv2d pads", "Conv", 11, [x, w], [F.conv2d(x, w, padding=1)], pads=[1, 1, 1, 1])
    x, w, b = t((2, 4, 7, 6)), t((6, 2, 3, 2)), t((6,))
    case("conv2d groups strides dilations bias", "Conv", 11, [x, w, b],
         [F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), dilation=(2, 1), groups=2)],
         group=2, strides=[2, 1], dilations=[2, 1], pads=[1, 0, 1, 0])
    x, w = t((1, 2, 5, 6)), t((3, 2, 3, 2))
    case("conv2d asymmetric pads", "Conv", 11, [x, w], [F.conv2d(F.pad(x, (1, 1, 0, 2)), w)], pads=[0, 1, 2, 1])
    x, w = t((2, 3, 10)), t((3, 1, 4))
    case("conv1d depthwise", "Conv", 1, [x, w], [F.conv1d(x, w, stride=3, padding=2, groups=3)],
         group=3, strides=[3], pads=[2, 2], kernel_shape=[4])
    x, w, b = t((1, 2, 4, 5, 4)), t((3, 2, 2, 3, 2)), t((3,))
    case("conv3d", "Conv", 22, [x, w, b], [F.conv3d(x, w, b, stride=(1, 2, 1), padding=1)], strides=[1, 2, 1], pads=[1] * 6)
    x, w = t((1, 2, 5, 6)), t((2, 2, 2, 2))
    # SAME: out = ceil(in/stride); H pads 1 in total, W pads 0.
    case("conv2d same_upper", "Conv", 11, [x, w], [F.conv2d(F.pad(x, (0, 0, 0, 1)), w, stride=2)], auto_pad="SAME_UPPER", strides=[2, 2])
    case("conv2d same_lower", "Conv", 11, [x, w], [F.conv2d(F.pad(x, (0, 0, 1, 0)), w, stride=2)], auto_pad="SAME_LOWER", strides=[2, 2])
    case("conv2d valid", "Conv", 11, [x, w], [F.conv2d(x, w, stride=2)], auto_pad="VALID", strides=[2, 2])
    x, w, b = t((2, 3, 4, 4)), t((5, 3, 1, 1)), t((5,))
    case("conv2d pointwise", "Conv", 11, [x, w, b], [F.conv2d(x, w, b)])


def conv_transpose_cases():
    x, w = t((1, 2, 3, 3)), t((2, 3, 3, 3))
    case("convtranspose2d output_padding", "ConvTranspose", 11, [x, w],
         [F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
    x, w, b = t((2, 4, 3, 4)), t((4, 1, 2, 3)), t((2,))
    case("convtranspose2d groups dilations", "ConvTranspose", 11, [x, w, b],
         [F.conv_transpose2d(x, w, b, stride=(2, 3), groups=2, dilation=2)], group=2, strides=[2, 3], dilations=[2, 2])
    x, w = t((1, 1, 5)), t((1, 2, 3))
    case("convtranspose1d", "ConvTranspose", 1, [x, w], [F.conv_transpose1d(x, w, stride=2)], strides=[2])
    x, w = t((1, 2, 2, 3, 2)), t((2, 1, 2, 2, 2))
    case("convtranspose3d", "ConvTranspose", 22, [x, w], [F.conv_transpose3d(x, w, stride=2)], strides=[2, 2, 2])
    x, w = t((1, 1, 3, 3)), t((1, 1, 3, 3))
    full = F.conv_transpose2d(x, w, stride=2)  # 7×7
    case("convtranspose output_shape larger", "ConvTranspose", 11, [x, w],
         [F.conv_transpose2d(x, w, stride=2, output_padding=(0, 1))], strides=[2, 2], output_shape=[7, 8])
    case("convtranspose output_shape smaller", "ConvTranspose", 11, [x, w], [full[:, :, 1:, 1:]], strides=[2, 2], output_shape=[6, 6])
    case("convtranspose same_upper", "ConvTranspose", 11, [x, w], [full[:, :, :6, :6]], strides=[2, 2], auto_pad="SAME_UPPER")
    case("convtranspose same_lower", "ConvTranspose", 11, [x, w], [full[:, :, 1:, 1:]], strides=[2, 2], auto_pad="SAME_LOWER")


def plane_indices(idx, x):
    """PyTorch's pooling indices count within a plane; ONNX's over the tensor."""
    n, c = x.shape[:2]
    plane = int(np.prod(x.shape[2:]))
    base = (torch.arange(n * c) * plane).reshape(n, c, *([1] * (x.dim() - 2)))
    return idx + base


def pool_cases():
    x = t((2, 3, 7, 6))
    y, i = F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
    case("maxpool2d ceil indices", "MaxPool", 12, [x], [y, plane_indices(i, x)], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    y, i = F.max_pool2d(x, (2, 3), stride=1, dilation=(2, 1), return_indices=True)
    # storage_order 1 counts the spatial axes column-major: h + w·H.
    h, w = i // 6, i % 6
    case("maxpool2d dilations column-major indices", "MaxPool", 12, [x], [y, plane_indices(h + w * 7, x)],
         kernel_shape=[2, 3], dilations=[2, 1], storage_order=1)
    x = t((1, 2, 9))
    case("maxpool1d", "MaxPool", 8, [x], [F.max_pool1d(x, 3, stride=2)], kernel_shape=[3], strides=[2])
    x = t((1, 1, 4, 5, 6))
    case("maxpool3d", "MaxPool", 12, [x], [F.max_pool3d(x, 2, stride=(1, 2, 2), padding=1)], kernel_shape=[2, 2, 2], strides=[1, 2, 2], pads=[1] * 6)
    x = t((2, 2, 7, 6))
    for include in (0, 1):
        for ceil in (0, 1):
            case(f"averagepool2d include_pad {include} ceil {ceil}", "AveragePool", 11, [x],
                 [F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=bool(ceil), count_include_pad=bool(include))],
                 kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=ceil, count_include_pad=include)
    x = t((1, 2, 9))
    case("averagepool1d", "AveragePool", 7, [x], [F.avg_pool1d(x, 4, stride=3)], kernel_shape=[4], strides=[3])
    x = t((1, 1, 4, 5, 6))
    case("averagepool3d", "AveragePool", 19, [x], [F.avg_pool3d(x, 2, stride=(1, 2, 2), padding=1, count_include_pad=False)],
         kernel_shape=[2, 2, 2], strides=[1, 2, 2], pads=[1] * 6)
    x = t((1, 2, 6, 7), 0.1, 2)
    case("lppool2d p2", "LpPool", 18, [x], [F.lp_pool2d(x, 2, (2, 3), stride=2)], kernel_shape=[2, 3], strides=[2, 2], p=2)
    case("lppool2d p3", "LpPool", 11, [x], [F.lp_pool2d(x, 3, 3, stride=1)], kernel_shape=[3, 3], p=3)
    x = t((2, 3, 4, 5))
    case("globalaveragepool", "GlobalAveragePool", 1, [x], [x.mean(dim=(2, 3), keepdim=True)])
    case("globalmaxpool", "GlobalMaxPool", 1, [x], [x.amax(dim=(2, 3), keepdim=True)])
    case("globallppool", "GlobalLpPool", 2, [x], [x.norm(p=3, dim=(2, 3), keepdim=True)], p=3)
    x = t((1, 2, 4, 4))
    y, i = F.max_pool2d(x, 2, stride=2, return_indices=True)
    case("maxunpool", "MaxUnpool", 11, [y, plane_indices(i, x)], [F.max_unpool2d(y, i, 2, stride=2)], kernel_shape=[2, 2], strides=[2, 2])
    case("maxunpool output_shape", "MaxUnpool", 11, [y, plane_indices(i, x) % 16 + torch.tensor([0, 25]).reshape(1, 2, 1, 1),
                                                       torch.tensor([1, 2, 5, 5])],
         [F.max_unpool2d(y, i, 2, stride=2, output_size=[5, 5])], kernel_shape=[2, 2], strides=[2, 2])


def resize_cases():
    x = t((1, 2, 3, 4))
    scales = torch.tensor([1, 1, 2, 1.5]).float()
    case("resize nearest asymmetric floor", "Resize", 13, [x, None, scales],
         [F.interpolate(x, scale_factor=(2, 1.5), mode="nearest")], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    sizes = torch.tensor([1, 2, 7, 5])
    case("resize nearest-exact", "Resize", 13, [x, None, None, sizes],
         [F.interpolate(x, size=(7, 5), mode="nearest-exact")], mode="nearest", nearest_mode="round_prefer_ceil")
    case("resize bilinear half_pixel", "Resize", 13, [x, None, None, sizes],
         [F.interpolate(x, size=(7, 5), mode="bilinear", align_corners=False)], mode="linear")
    case("resize bilinear align_corners", "Resize", 13, [x, None, None, sizes],
         [F.interpolate(x, size=(7, 5), mode="bilinear", align_corners=True)], mode="linear", coordinate_transformation_mode="align_corners")
    case("resize bicubic half_pixel", "Resize", 13, [x, None, None, sizes],
         [F.interpolate(x, size=(7, 5), mode="bicubic", align_corners=False)], mode="cubic")
    case("resize bicubic align_corners", "Resize", 13, [x, None, None, sizes],
         [F.interpolate(x, size=(7, 5), mode="bicubic", align_corners=True)], mode="cubic", coordinate_transformation_mode="align_corners")
    x3 = t((1, 1, 2, 3, 4))
    case("resize trilinear", "Resize", 18, [x3, None, None, torch.tensor([3, 5, 6])],
         [F.interpolate(x3, size=(3, 5, 6), mode="trilinear")], mode="linear", axes=[2, 3, 4])
    x1 = t((1, 2, 5))
    case("resize linear 1d", "Resize", 11, [x1, torch.tensor([]), torch.tensor([]).float(), torch.tensor([1, 2, 9])],
         [F.interpolate(x1, size=9, mode="linear")], mode="linear")
    x = t((1, 1, 2, 3))
    case("upsample nearest", "Upsample", 9, [x, torch.tensor([1, 1, 2, 3]).float()],
         [F.interpolate(x, scale_factor=(2, 3), mode="nearest")], mode="nearest")


def grid_cases():
    x = t((2, 3, 4, 5))
    grid = t((2, 3, 6, 2), -1.3, 1.3)
    for mode, onnx_mode in (("bilinear", "linear"), ("nearest", "nearest"), ("bicubic", "cubic")):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                case(f"gridsample {mode} {padding} align {align}", "GridSample", 20, [x, grid],
                     [F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=bool(align))],
                     mode=onnx_mode, padding_mode=padding, align_corners=align)
    case("gridsample opset 16 names", "GridSample", 16, [x, grid],
         [F.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=False)], mode="bicubic", padding_mode="border")
    x = t((1, 2, 3, 4, 5))
    grid = t((1, 2, 3, 4, 3), -1.2, 1.2)
    for mode, onnx_mode in (("bilinear", "linear"), ("nearest", "nearest")):
        for padding in ("zeros", "reflection"):
            case(f"gridsample 3d {mode} {padding}", "GridSample", 20, [x, grid],
                 [F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=False)], mode=onnx_mode, padding_mode=padding)
    theta = t((2, 2, 3))
    for align in (0, 1):
        case(f"affinegrid 2d align {align}", "AffineGrid", 20, [theta, torch.tensor([2, 3, 4, 5])],
             [F.affine_grid(theta, [2, 3, 4, 5], align_corners=bool(align))], align_corners=align)
    theta = t((1, 3, 4))
    case("affinegrid 3d", "AffineGrid", 20, [theta, torch.tensor([1, 1, 2, 3, 4])],
         [F.affine_grid(theta, [1, 1, 2, 3, 4], align_corners=False)])


def causal_conv_cases():
    x, w, b, past = t((2, 3, 6)), t((3, 1, 4)), t((3,)), t((2, 3, 3))
    seq = torch.cat([past, x], dim=2)
    y = F.conv1d(seq, w, b, groups=3)
    case("causalconvwithstate silu past bias", "CausalConvWithState", 27, [x, w, b, past],
         [F.silu(y), seq[:, :, -3:]], activation="silu")
    seq = torch.cat([torch.zeros(2, 3, 3), x], dim=2)
    case("causalconvwithstate zeros", "CausalConvWithState", 27, [x, w], [F.conv1d(seq, w, groups=3), seq[:, :, -3:]])


def lrn_cases():
    x = t((2, 5, 3, 4))
    # alpha, beta and bias are float32 attributes: values float32 holds exactly.
    case("lrn size 3", "LRN", 13, [x], [F.local_response_norm(x, 3, alpha=2**-12, beta=0.625, k=1.5)], size=3, alpha=2**-12, beta=0.625, bias=1.5)


def fold_and_fourier_cases():
    cols = t((2, 3 * 2 * 3, 12))
    case("col2im", "Col2Im", 18, [cols, torch.tensor([6, 7]), torch.tensor([2, 3])],
         [F.fold(cols, (6, 7), (2, 3), dilation=(2, 1), padding=1, stride=(2, 2))], dilations=[2, 1], pads=[1, 1, 1, 1], strides=[2, 2])
    x = t((2, 6, 3))
    case("dft axis 1", "DFT", 20, [x.unsqueeze(-1), None, torch.tensor(1)], [torch.view_as_real(torch.fft.fft(x, dim=1))])
    case("dft length 8 opset 17", "DFT", 17, [x.unsqueeze(-1), torch.tensor(8)], [torch.view_as_real(torch.fft.fft(x, n=8, dim=1))], axis=1)
    z = torch.complex(t((2, 5, 3)), t((2, 5, 3)))
    # axis -2 is the last signal axis (the last holds the components).
    case("dft complex inverse", "DFT", 20, [torch.view_as_real(z), None, torch.tensor(-2)],
         [torch.view_as_real(torch.fft.ifft(z, dim=-1))], inverse=1)
    case("dft rfft", "DFT", 20, [x.unsqueeze(-1), None, torch.tensor(1)], [torch.view_as_real(torch.fft.rfft(x, dim=1))], onesided=1)
    h = torch.fft.rfft(t((2, 7, 3)), dim=1)
    case("dft irfft", "DFT", 20, [torch.view_as_real(h), torch.tensor(12), torch.tensor(1)],
         [torch.fft.irfft(h, n=12, dim=1).unsqueeze(-1)], inverse=1, onesided=1)
    sig, win = t((2, 40)), t((16,), 0, 1)
    ref = torch.stft(sig, 16, hop_length=5, window=win, center=False, onesided=True, return_complex=True)
    case("stft window", "STFT", 17, [sig.unsqueeze(-1), torch.tensor(5), win], [torch.view_as_real(ref).transpose(1, 2)])
    ref = torch.stft(sig, 10, hop_length=3, window=torch.ones(10), center=False, onesided=False, return_complex=True)
    for name, fn in (("Hann", torch.hann_window), ("Hamming", torch.hamming_window), ("Blackman", torch.blackman_window)):
        for periodic in (1, 0):
            kw = {"alpha": 25 / 46, "beta": 21 / 46} if name == "Hamming" else {}
            case(f"{name.lower()}window periodic {periodic}", f"{name}Window", 17, [torch.tensor(10)],
                 [fn(10, periodic=bool(periodic), dtype=torch.float64, **kw)], periodic=periodic, output_datatype=11)
    case("stft frame_length twosided", "STFT", 17, [sig.unsqueeze(-1), torch.tensor(3), None, torch.tensor(10)],
         [torch.view_as_real(ref).transpose(1, 2)], onesided=0)


def ort_case(name, op, opset, inputs, **attrs):
    """A case whose expected output is ONNX Runtime's (float32 inputs)."""
    arrays = [None if x is None else (x.numpy().astype(np.float32) if x.dtype == torch.float64 else x.numpy()) for x in inputs]
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(arrays)]
    elem = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64,
            np.dtype("uint8"): TensorProto.UINT8, np.dtype("int32"): TensorProto.INT32}
    out_elem = {"NonMaxSuppression": TensorProto.INT64, "ConvInteger": TensorProto.INT32, "QLinearConv": TensorProto.UINT8}
    graph = helper.make_graph(
        [helper.make_node(op, names, ["out"], **attrs)], name,
        [helper.make_tensor_value_info(n, elem[a.dtype], a.shape) for n, a in zip(names, arrays) if a is not None],
        [helper.make_tensor_value_info("out", out_elem.get(op, TensorProto.FLOAT), None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    out = sess.run(None, {n: a for n, a in zip(names, arrays) if a is not None})[0]
    case(name, op, opset, [None if a is None else torch.from_numpy(a) for a in arrays], [torch.from_numpy(out)], tol32=False, **attrs)


def ort_cases():
    # PyTorch's antialias is PIL's filter (bicubic with a = -0.5), not
    # ONNX's stretched filter, so these take ONNX Runtime's results.
    x = t((1, 1, 8, 9))
    down = torch.tensor([1, 1, 3, 4])
    ort_case("resize linear antialias", "Resize", 18, [x, None, None, down], mode="linear", antialias=1)
    ort_case("resize cubic antialias", "Resize", 18, [x, None, None, down], mode="cubic", antialias=1)
    x = t((2, 3, 10, 9))
    rois = torch.tensor([[0.5, 1.2, 6.3, 7.9], [2.0, 0.0, 8.5, 4.4], [-1.0, 3.0, 3.0, 11.0]])
    batches = torch.tensor([0, 1, 1])
    for mode in ("avg", "max"):
        for ctm in ("half_pixel", "output_half_pixel"):
            ort_case(f"roialign {mode} {ctm}", "RoiAlign", 16, [x, rois, batches], mode=mode,
                     coordinate_transformation_mode=ctm, output_height=3, output_width=4, sampling_ratio=0, spatial_scale=0.8)
    x, w, b = t((1, 4, 5, 6)), t((4, 2, 2, 3)), t((4,))
    offset, mask = t((1, 2 * 6 * 2, 4, 4), -1.5, 1.5), t((1, 2 * 6, 4, 4), 0, 1)
    ort_case("deformconv groups offset_groups mask", "DeformConv", 19, [x, w, offset, b, mask],
             group=2, offset_group=2, kernel_shape=[2, 3], pads=[0, 0, 0, 0])
    xq = torch.tensor(rng.integers(0, 256, (1, 2, 5, 5)), dtype=torch.uint8)
    wq = torch.tensor(rng.integers(0, 256, (3, 2, 3, 3)), dtype=torch.uint8)
    ort_case("convinteger", "ConvInteger", 10, [xq, wq, torch.tensor(131, dtype=torch.uint8), torch.tensor(120, dtype=torch.uint8)],
             pads=[1, 1, 1, 1], strides=[2, 1])
    ort_case("qlinearconv per-channel", "QLinearConv", 10,
             [xq, torch.tensor(0.02), torch.tensor(131, dtype=torch.uint8), wq, torch.tensor([0.01, 0.003, 0.02]),
              torch.tensor([120, 128, 100], dtype=torch.uint8), torch.tensor(0.5), torch.tensor(10, dtype=torch.uint8),
              torch.tensor([100, -2000, 5], dtype=torch.int32)], pads=[1, 1, 1, 1])
    ort_case("melweightmatrix", "MelWeightMatrix", 17,
             [torch.tensor(8), torch.tensor(64), torch.tensor(16000), torch.tensor(100.0), torch.tensor(7000.0)])
    boxes = torch.tensor([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9], [0.0, 10.0, 1.0, 11.0],
                           [1.0, 1.0, 0.0, 0.0], [0.0, 100.0, 1.0, 101.0]]])
    scores = torch.tensor([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.8, 0.85, 0.2, 0.9, 0.7]]])
    ort_case("nonmaxsuppression", "NonMaxSuppression", 11,
             [boxes, scores, torch.tensor([2]), torch.tensor([0.5]), torch.tensor([0.15])])


conv_cases()
conv_transpose_cases()
causal_conv_cases()
lrn_cases()
pool_cases()
resize_cases()
grid_cases()
fold_and_fourier_cases()
ort_cases()

with open("cases.json", "w") as f:
    json.dump(CASES, f)
print(len(CASES), "cases")
