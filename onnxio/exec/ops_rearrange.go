package exec

import (
	"errors"
	"fmt"
)

// Ops that move elements without computing: DepthToSpace, SpaceToDepth
// (NCHW, any element type) and ReverseSequence.
func init() {
	blocks := map[string]attrKind{"blocksize": attrInt, "mode": attrString}
	// DepthToSpace's mode (CRD) exists from opset 11, SpaceToDepth's from
	// 28; the revisions between only added element types.
	ops["DepthToSpace"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: blocks,
		check: checkBlocks(11), run: depthToSpaceOp}
	ops["SpaceToDepth"] = &opSpec{since: 1, minIn: 1, maxIn: 1, minOut: 1, maxOut: 1, attrs: blocks,
		check: checkBlocks(28), run: spaceToDepthOp}
	ops["ReverseSequence"] = &opSpec{since: 10, minIn: 2, maxIn: 2, minOut: 1, maxOut: 1, run: reverseSequenceOp,
		attrs: map[string]attrKind{"batch_axis": attrInt, "time_axis": attrInt}}
}

// checkBlocks checks blocksize and mode; mode is defined from opset
// modeSince on, and a node of an older opset carrying it would be run
// with a meaning its opset does not give it.
func checkBlocks(modeSince int) func(n *node) error {
	return func(n *node) error {
		if n.attrInt("blocksize", 0) < 1 {
			return errors.New("needs attribute blocksize of at least 1")
		}
		if n.has("mode") && n.opset < modeSince {
			return fmt.Errorf("has attribute %q, which %s defines from opset %d on", "mode", n.op, modeSince)
		}
		if m := n.attrString("mode", "DCR"); m != "DCR" && m != "CRD" {
			return fmt.Errorf("mode %q is neither DCR nor CRD", m)
		}
		return nil
	}
}

// depthToSpaceOp is the kernel of DepthToSpace: (N, C, H, W) becomes
// (N, C/b², H·b, W·b). DCR reads the channels as (b, b, C/b²), CRD as
// (C/b², b, b).
func depthToSpaceOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, bs := in[0], int(n.attrInt("blocksize", 0))
	if x.rank() != 4 || x.shape[1]%(bs*bs) != 0 {
		return nil, fmt.Errorf("input must be (N, C, H, W) with C divisible by blocksize² = %d, is %s", bs*bs, x.describe())
	}
	nb, c, h, w := x.shape[0], x.shape[1]/(bs*bs), x.shape[2], x.shape[3]
	split, perm := []int{nb, bs, bs, c, h, w}, []int{0, 3, 4, 1, 5, 2}
	if n.attrString("mode", "DCR") == "CRD" {
		split, perm = []int{nb, c, bs, bs, h, w}, []int{0, 1, 4, 2, 5, 3}
	}
	return oneOrErr(permuted(rc, n, x, split, perm, []int{nb, c, h * bs, w * bs}))
}

// spaceToDepthOp is the kernel of SpaceToDepth, the inverse of
// DepthToSpace in the same mode: (N, C, H, W) becomes (N, C·b², H/b, W/b).
func spaceToDepthOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x, bs := in[0], int(n.attrInt("blocksize", 0))
	if x.rank() != 4 || x.shape[2]%bs != 0 || x.shape[3]%bs != 0 {
		return nil, fmt.Errorf("input must be (N, C, H, W) with H and W divisible by blocksize %d, is %s", bs, x.describe())
	}
	nb, c, h, w := x.shape[0], x.shape[1], x.shape[2]/bs, x.shape[3]/bs
	perm := []int{0, 3, 5, 1, 2, 4}
	if n.attrString("mode", "DCR") == "CRD" {
		perm = []int{0, 1, 3, 5, 2, 4}
	}
	return oneOrErr(permuted(rc, n, x, []int{nb, c, h, bs, w, bs}, perm, []int{nb, c * bs * bs, h, w}))
}

// permuted returns x viewed as split, transposed by perm, as a new value
// of shape out (numpy's reshape(transpose(reshape(x, split), perm), out)).
func permuted(rc *runCtx, n *node, x *value, split, perm, out []int) (*value, error) {
	st := stridesOf(split)
	shape, strides := make([]int, len(perm)), make([]int, len(perm))
	for i, p := range perm {
		shape[i], strides[i] = split[p], st[p]
	}
	y, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	copyView(y.data, contiguous(shape), x.data, view{strides: strides}, shape)
	return y.withShape(out), nil
}

// reverseSequenceOp is the kernel of ReverseSequence: along time_axis
// (default 0), the first sequence_lens[b] elements of each batch entry b
// (along batch_axis, default 1) are reversed and the rest copied.
func reverseSequenceOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	x := in[0]
	ta, ba := int(n.attrInt("time_axis", 0)), int(n.attrInt("batch_axis", 1))
	if ta < 0 || ta > 1 || ba < 0 || ba > 1 || ta == ba {
		return nil, fmt.Errorf("time_axis %d and batch_axis %d must be 0 and 1, one each", ta, ba)
	}
	if x.rank() < 2 {
		return nil, fmt.Errorf("input must have rank 2 or more, is %s", x.describe())
	}
	lens, err := ints(rc, n, in[1])
	if err != nil || len(lens) != x.shape[ba] {
		return nil, fmt.Errorf("sequence_lens must hold %d int64 values (the batch size), is %s", x.shape[ba], in[1].describe())
	}
	out, err := rc.alloc(n, x.dtype, x.shape)
	if err != nil {
		return nil, err
	}
	st := stridesOf(x.shape)
	inner := numel(x.shape[2:]) // a contiguous block per (time, batch) pair
	block := []int{inner}
	for b, l := range lens {
		if l < 0 || l > int64(x.shape[ta]) {
			return nil, fmt.Errorf("sequence_lens[%d] is %d, outside [0, %d]", b, l, x.shape[ta])
		}
		for t := range x.shape[ta] {
			from := t
			if t < int(l) {
				from = int(l) - 1 - t
			}
			dst := view{offset: t*st[ta] + b*st[ba], strides: []int{1}}
			src := view{offset: from*st[ta] + b*st[ba], strides: []int{1}}
			copyView(out.data, dst, x.data, src, block)
		}
	}
	return one(out)
}
