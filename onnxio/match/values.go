package match

import (
	"fmt"

	"gorgonia.org/tensor"
)

// Floats widens a numeric tensor's elements to float64 (bool as 0 and
// 1), for patterns that compare the numbers a graph holds whatever their
// element type.
func Floats(t *tensor.Dense) ([]float64, error) {
	switch d := t.Data().(type) {
	case []float32:
		return widen(d), nil
	case []float64:
		return d, nil
	case []int64:
		return widen(d), nil
	case []int32:
		return widen(d), nil
	case []int8:
		return widen(d), nil
	case []uint8:
		return widen(d), nil
	case []bool:
		out := make([]float64, len(d))
		for i, v := range d {
			if v {
				out[i] = 1
			}
		}
		return out, nil
	case float32:
		return []float64{float64(d)}, nil
	case float64:
		return []float64{d}, nil
	case int64:
		return []float64{float64(d)}, nil
	case int32:
		return []float64{float64(d)}, nil
	case bool:
		if d {
			return []float64{1}, nil
		}
		return []float64{0}, nil
	}
	return nil, fmt.Errorf("tensor of dtype %v is not numeric", t.Dtype())
}

// widen converts numbers to float64.
func widen[T float32 | int64 | int32 | int8 | uint8](d []T) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v)
	}
	return out
}

// Float32 returns a float32 copy of a numeric tensor, for a parameter read
// from the graph.
func Float32(t *tensor.Dense) (*tensor.Dense, error) {
	f, err := Floats(t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(f))
	for i, v := range f {
		out[i] = float32(v)
	}
	return tensor.New(tensor.WithShape(t.Shape().Clone()...), tensor.WithBacking(out)), nil
}

// Tokens reads the shape of a token tensor, (T, d) or (B, T, d), as
// sequences B (1 for (T, d)), tokens T per sequence and features d.
func Tokens(shape []int) (b, t, d int, ok bool) {
	switch len(shape) {
	case 3:
		return shape[0], shape[1], shape[2], true
	case 2:
		return 1, shape[0], shape[1], true
	}
	return 0, 0, 0, false
}

// ReducesLastAxis reports whether n, a ReduceMean or ReduceSum, reduces
// the last axis alone and keeps the reduced dimension, its axes given as
// an attribute (before opset 18) or as its second input.
func ReducesLastAxis(g Graph, n *Node) bool {
	shape, _ := g.Shape(n.Inputs()[0])
	rank := len(shape)
	var axes []int64
	if n.Has("axes") {
		axes = n.Ints("axes")
	} else if ins := n.Inputs(); len(ins) > 1 {
		t, err := g.ValueAt(0, ins[1])
		if err != nil {
			return false
		}
		f, _ := Floats(t)
		for _, v := range f {
			axes = append(axes, int64(v))
		}
	}
	return len(axes) == 1 && (axes[0] == -1 || axes[0] == int64(rank-1)) && n.Int("keepdims", 1) == 1
}

// Rows returns rows lo:hi of a float32 (r, c) matrix, or elements lo:hi of
// a vector, as a new tensor: one projection's block of a packed in_proj.
func Rows(t *tensor.Dense, lo, hi int) *tensor.Dense {
	data := t.Data().([]float32)
	if t.Dims() == 1 {
		return tensor.New(tensor.WithShape(hi-lo), tensor.WithBacking(append([]float32(nil), data[lo:hi]...)))
	}
	c := t.Shape()[1]
	return tensor.New(tensor.WithShape(hi-lo, c), tensor.WithBacking(append([]float32(nil), data[lo*c:hi*c]...)))
}

// Stack concatenates float32 matrices or vectors along their first axis.
func Stack(ts []*tensor.Dense) *tensor.Dense {
	var data []float32
	n := 0
	for _, t := range ts {
		data = append(data, t.Data().([]float32)...)
		n += t.Shape()[0]
	}
	if ts[0].Dims() == 1 {
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(data))
	}
	return tensor.New(tensor.WithShape(n, ts[0].Shape()[1]), tensor.WithBacking(data))
}
