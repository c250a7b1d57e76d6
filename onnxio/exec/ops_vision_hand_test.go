package exec

import (
	"context"
	"testing"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVisionOpsByHand checks the vision ops on small cases worked out by
// hand (the arithmetic is in the comments).
func TestVisionOpsByHand(t *testing.T) {
	str := func(s string) attribute { return attribute{kind: attrString, s: s} }
	img := f32(dims(1, 1, 3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9)
	ones := f32(dims(1, 1, 2, 2), 1, 1, 1, 1)
	runOpCases(t, []opCase{
		// Window sums of 1..9: 1+2+4+5, 2+3+5+6, 4+5+7+8, 5+6+8+9, plus bias 1.
		{name: "conv", op: "Conv", opset: 11, in: []*value{img, ones, f32(dims(1), 1)}, want: []*value{f32(dims(1, 1, 2, 2), 13, 17, 25, 29)}},
		// Padded by one on each side, stride 2: corners 1, 2+3, 4+7, 5+6+8+9.
		{name: "conv pads strides", op: "Conv", opset: 11, attrs: attrs{"pads": aInts(1, 1, 1, 1), "strides": aInts(2, 2)},
			in: []*value{img, ones}, want: []*value{f32(dims(1, 1, 2, 2), 1, 5, 11, 28)}},
		// x [1, 2] spread by kernel [1, 1, 1] at stride 2: [1, 1, 1+2, 2, 2].
		{name: "convtranspose", op: "ConvTranspose", opset: 11, attrs: attrs{"strides": aInts(2)},
			in: []*value{f32(dims(1, 1, 2), 1, 2), f32(dims(1, 1, 3), 1, 1, 1)}, want: []*value{f32(dims(1, 1, 5), 1, 1, 3, 2, 2)}},
		// The maximum 4 sits at (0, 1): flat 1 row-major, 0 + 1·2 = 2 column-major.
		{name: "maxpool indices", op: "MaxPool", opset: 12, attrs: attrs{"kernel_shape": aInts(2, 2)}, outs: 2,
			in: []*value{f32(dims(1, 1, 2, 2), 1, 4, 3, 2)}, want: []*value{f32(dims(1, 1, 1, 1), 4), i64(dims(1, 1, 1, 1), 1)}},
		{name: "maxpool column-major indices", op: "MaxPool", opset: 12, attrs: attrs{"kernel_shape": aInts(2, 2), "storage_order": aInt(1)}, outs: 2,
			in: []*value{f32(dims(1, 1, 2, 2), 1, 4, 3, 2)}, want: []*value{f32(dims(1, 1, 1, 1), 4), i64(dims(1, 1, 1, 1), 2)}},
		{name: "maxpool nan", op: "MaxPool", opset: 12, attrs: attrs{"kernel_shape": aInts(2)},
			in: []*value{f32(dims(1, 1, 3), 1, nan32, 2)}, want: []*value{f32(dims(1, 1, 2), nan32, nan32)}},
		// [pad, 2], [2, 4], [4, pad]: 2/1, 3, 4/1 without the pads; 2/2, 3, 4/2 with them.
		{name: "averagepool", op: "AveragePool", opset: 11, attrs: attrs{"kernel_shape": aInts(2), "pads": aInts(1, 1)},
			in: []*value{f32(dims(1, 1, 2), 2, 4)}, want: []*value{f32(dims(1, 1, 3), 2, 3, 4)}},
		{name: "averagepool count_include_pad", op: "AveragePool", opset: 11, attrs: attrs{"kernel_shape": aInts(2), "pads": aInts(1, 1), "count_include_pad": aInt(1)},
			in: []*value{f32(dims(1, 1, 2), 2, 4)}, want: []*value{f32(dims(1, 1, 3), 1, 3, 2)}},
		// √(3² + 4²) = 5.
		{name: "lppool", op: "LpPool", opset: 18, attrs: attrs{"kernel_shape": aInts(2)},
			in: []*value{f64(dims(1, 1, 2), 3, -4)}, want: []*value{f64(dims(1, 1, 1), 5)}},
		// Even size 2 sums channels c and c+1: 1+4, 4+9, 9; y = x/(1 + 2/2·sum).
		{name: "lrn even size", op: "LRN", opset: 13, attrs: attrs{"size": aInt(2), "alpha": aFloat(2), "beta": aFloat(1), "bias": aFloat(1)},
			in: []*value{f64(dims(1, 3, 1), 1, 2, 3)}, want: []*value{f64(dims(1, 3, 1), 1.0/6, 2.0/14, 3.0/10)}},
		{name: "globalaveragepool", op: "GlobalAveragePool", opset: 1, in: []*value{img}, want: []*value{f32(dims(1, 1, 1, 1), 5)}},
		{name: "globalmaxpool", op: "GlobalMaxPool", opset: 1, in: []*value{img}, want: []*value{f32(dims(1, 1, 1, 1), 9)}},
		// ONNX Runtime and PyTorch's max_unpool2d place flat index 5 of the 5×5 output at (1, 0).
		{name: "maxunpool output_shape", op: "MaxUnpool", opset: 22, attrs: attrs{"kernel_shape": aInts(2, 2), "strides": aInts(2, 2)},
			in:   []*value{f32(dims(1, 1, 2, 2), 5, 6, 7, 8), i64(dims(1, 1, 2, 2), 5, 7, 13, 15), i64(dims(4), 1, 1, 5, 5)},
			want: []*value{f32(dims(1, 1, 5, 5), 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0)}},
		// Asymmetric, floor: output x reads input floor(x/2).
		{name: "resize nearest", op: "Resize", opset: 13, attrs: attrs{"coordinate_transformation_mode": str("asymmetric"), "nearest_mode": str("floor")},
			in: []*value{i64(dims(1, 2), 1, 2), nil, f32(dims(2), 1, 2)}, want: []*value{i64(dims(1, 4), 1, 1, 2, 2)}},
		// half_pixel at scale 2 samples -0.25, 0.25, 0.75, 1.25 of [0, 4]: 0 (border), 1, 3, 4 (border).
		{name: "resize linear", op: "Resize", opset: 13, attrs: attrs{"mode": str("linear")},
			in: []*value{f32(dims(2), 0, 4), nil, nil, i64(dims(1), 4)}, want: []*value{f32(dims(4), 0, 1, 3, 4)}},
		// Crop 5 to 3 starts at (5-3)/2 = 1; pad 5 to 8 puts (8-5)/2 = 1 zero before and 2 after.
		{name: "centercroppad crop", op: "CenterCropPad", opset: 18, in: []*value{i32(dims(5), 1, 2, 3, 4, 5), i64(dims(1), 3)}, want: []*value{i32(dims(3), 2, 3, 4)}},
		{name: "centercroppad pad", op: "CenterCropPad", opset: 18, in: []*value{i32(dims(5), 1, 2, 3, 4, 5), i64(dims(1), 8)}, want: []*value{i32(dims(8), 0, 1, 2, 3, 4, 5, 0, 0)}},
		// Blocks [a, b] at image positions 0-1 and [c, d] at 1-2 (rows are block elements): a, b+c, d.
		{name: "col2im", op: "Col2Im", opset: 18, in: []*value{f32(dims(1, 2, 2), 1, 3, 2, 4), i64(dims(1), 3), i64(dims(1), 2)}, want: []*value{f32(dims(1, 1, 3), 1, 5, 4)}},
		// The centre (0, 0) of a 2×2 image without align_corners lies between all four pixels.
		{name: "gridsample centre", op: "GridSample", opset: 16, in: []*value{f32(dims(1, 1, 2, 2), 1, 2, 3, 6), f32(dims(1, 1, 1, 2), 0, 0)}, want: []*value{f32(dims(1, 1, 1, 1), 3)}},
		{name: "gridsample nan", op: "GridSample", opset: 16, in: []*value{f32(dims(1, 1, 2, 2), 1, 2, 3, 6), f32(dims(1, 1, 1, 2), nan32, 0)}, want: []*value{f32(dims(1, 1, 1, 1), nan32)}},
		// The identity maps the pixel centres of a 2×2 grid to ±0.5.
		{name: "affinegrid identity", op: "AffineGrid", opset: 20, in: []*value{f32(dims(1, 2, 3), 1, 0, 0, 0, 1, 0), i64(dims(4), 1, 1, 2, 2)},
			want: []*value{f32(dims(1, 2, 2, 2), -0.5, -0.5, 0.5, -0.5, -0.5, 0.5, 0.5, 0.5)}},
		// DFT of [1, 1, 1, 1] is [4, 0, 0, 0]; of an impulse, all ones.
		{name: "dft", op: "DFT", opset: 17, in: []*value{f64(dims(2, 4, 1), 1, 1, 1, 1, 1, 0, 0, 0)},
			want: []*value{f64(dims(2, 4, 2), 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0)}},
		// Box 1 overlaps box 0 by IoU 0.8/1.2 > 0.5 and goes; box 2 does not overlap.
		{name: "nonmaxsuppression", op: "NonMaxSuppression", opset: 11,
			in:   []*value{f32(dims(1, 3, 4), 0, 0, 1, 1, 0, 0.2, 1, 1.2, 5, 5, 6, 6), f32(dims(1, 1, 3), 0.9, 0.8, 0.7), i64(dims(1), 3), f32(dims(1), 0.5)},
			want: []*value{i64(dims(2, 3), 0, 0, 0, 0, 0, 2)}},
	})
}

// TestVisionOpErrors checks that malformed nodes and inputs are errors
// that say what is wrong.
func TestVisionOpErrors(t *testing.T) {
	str := func(s string) attribute { return attribute{kind: attrString, s: s} }
	x := f32(dims(1, 4, 3, 3), make([]float32, 36)...)
	runOpCases(t, []opCase{
		{name: "conv groups", op: "Conv", opset: 11, attrs: attrs{"group": aInt(3)}, in: []*value{x, f32(dims(2, 1, 1, 1), 1, 1)}, err: "do not divide into 3 groups"},
		{name: "conv weights", op: "Conv", opset: 11, in: []*value{x, f32(dims(2, 3, 1, 1), 1, 1, 1, 1, 1, 1)}, err: "must have 4 input channels per group"},
		{name: "conv pads", op: "Conv", opset: 11, attrs: attrs{"pads": aInts(1, 1)}, in: []*value{x, f32(dims(1, 4, 1, 1), 1, 1, 1, 1)}, err: "pads has 2 values for 2 spatial axes, want 4"},
		{name: "conv kernel too large", op: "Conv", opset: 11, in: []*value{x, f32(dims(1, 4, 4, 1), make([]float32, 16)...)}, err: "the kernel spans 4 positions along spatial axis 0, more than the 3"},
		{name: "conv auto_pad", op: "Conv", opset: 11, attrs: attrs{"auto_pad": str("SAME")}, in: []*value{x, f32(dims(1, 4, 1, 1), 1, 1, 1, 1)}, err: `auto_pad "SAME" is not`},
		{name: "maxpool kernel", op: "MaxPool", opset: 12, attrs: attrs{"kernel_shape": aInts(2)}, in: []*value{x}, err: "kernel_shape has 1 values for 2 spatial axes"},
		{name: "resize both", op: "Resize", opset: 13, in: []*value{x, nil, f32(dims(4), 1, 1, 2, 2), i64(dims(4), 1, 4, 6, 6)}, err: "scales and sizes are both given"},
		{name: "resize mode", op: "Resize", opset: 13, attrs: attrs{"mode": str("area")}, in: []*value{x, nil, f32(dims(4), 1, 1, 2, 2)}, err: `mode "area" is not nearest, linear or cubic`},
		{name: "resize linear ints", op: "Resize", opset: 13, attrs: attrs{"mode": str("linear")}, in: []*value{i64(dims(2), 1, 2), nil, f32(dims(1), 2)}, err: "want float32 or float64"},
		{name: "gridsample padding", op: "GridSample", opset: 20, attrs: attrs{"padding_mode": str("wrap")}, in: []*value{x, f32(dims(1, 1, 1, 2), 0, 0)}, err: `padding_mode "wrap"`},
		{name: "gridsample 3d at opset 16", op: "GridSample", opset: 16, in: []*value{f32(dims(1, 1, 1, 1, 1), 1), f32(dims(1, 1, 1, 1, 3), 0, 0, 0)}, err: "2-D images only"},
		{name: "maxunpool index", op: "MaxUnpool", opset: 11, attrs: attrs{"kernel_shape": aInts(2)}, in: []*value{f32(dims(1, 1, 1), 1), i64(dims(1, 1, 1), 2)}, err: "index 2 at position 0 of I is out of range"},
		{name: "dft axis", op: "DFT", opset: 20, in: []*value{f32(dims(2, 3, 1), 1, 2, 3, 4, 5, 6), nil, i64(dims(), 2)}, err: "axis 2 is out of range"},
		{name: "roialign batch", op: "RoiAlign", opset: 16, in: []*value{x, f32(dims(1, 4), 0, 0, 1, 1), i64(dims(1), 1)}, err: "batch index 1 is out of range"},
	})
	assert.ErrorContains(t, needKernelShape(&node{}), "kernel_shape is required")
}

// TestVisionOpsHonourBudgetAndContext checks that the convolution's
// column matrix is reserved from the run's budget and that a cancelled
// run stops.
func TestVisionOpsHonourBudgetAndContext(t *testing.T) {
	x := f32(dims(1, 8, 32, 32), make([]float32, 8*32*32)...)
	w := f32(dims(4, 8, 3, 3), make([]float32, 4*8*9)...)
	n := &node{name: "conv", op: "Conv", opset: 11, spec: ops["Conv"], out: []int{0}}
	// The output (16 KiB) fits, the tap table (9 × 900 int64) and the
	// 8·9 × 900 column matrix (259 KiB) do not.
	_, err := ops["Conv"].run(newRunCtx(context.Background(), budget.New(64<<10)), n, []*value{x, w})
	require.ErrorIs(t, err, budget.ErrExceeded)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ops["Conv"].run(newRunCtx(ctx, nil), n, []*value{x, w})
	require.ErrorIs(t, err, context.Canceled)
	r := &node{name: "resize", op: "Resize", opset: 13, spec: ops["Resize"], out: []int{0}}
	_, err = ops["Resize"].run(newRunCtx(context.Background(), budget.New(1<<10)), r, []*value{x, nil, f32(dims(4), 1, 1, 2, 2)})
	require.ErrorIs(t, err, budget.ErrExceeded)
}
