package exec

import "fmt"

// binaryMap applies f elementwise to a and b under numpy broadcasting and
// returns a new value of type outDT, allocated for node n.
func binaryMap[A, B, R element](rc *runCtx, n *node, a, b *value, outDT DType, f func(A, B) R) (*value, error) {
	shape, err := broadcastShapes(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, outDT, shape)
	if err != nil {
		return nil, err
	}
	x, y, o := a.data.([]A), b.data.([]B), out.data.([]R)
	strides := [][]int{broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape), stridesOf(shape)}
	walk(shape, strides, func(off []int, n int, step []int) {
		ia, ib, dst := off[0], off[1], o[off[2]:off[2]+n]
		switch sa, sb := step[0], step[1]; {
		case sa == 1 && sb == 1:
			xs, ys := x[ia:ia+n], y[ib:ib+n]
			for i := range dst {
				dst[i] = f(xs[i], ys[i])
			}
		case sa == 1 && sb == 0:
			xs, yv := x[ia:ia+n], y[ib]
			for i := range dst {
				dst[i] = f(xs[i], yv)
			}
		case sa == 0 && sb == 1:
			xv, ys := x[ia], y[ib:ib+n]
			for i := range dst {
				dst[i] = f(xv, ys[i])
			}
		default:
			for i := range dst {
				dst[i] = f(x[ia], y[ib])
				ia += sa
				ib += sb
			}
		}
	})
	return out, nil
}

// unaryMap applies f to every element of v and returns a new value of type
// outDT, allocated for node n.
func unaryMap[T, R element](rc *runCtx, n *node, v *value, outDT DType, f func(T) R) (*value, error) {
	out, err := rc.alloc(n, outDT, v.shape)
	if err != nil {
		return nil, err
	}
	x, o := v.data.([]T), out.data.([]R)
	for i, e := range x {
		o[i] = f(e)
	}
	return out, nil
}

// sameDType checks that all present operands share one element type.
func sameDType(in []*value) error {
	var first *value
	for _, v := range in {
		if v == nil {
			continue
		}
		if first == nil {
			first = v
		} else if v.dtype != first.dtype {
			return fmt.Errorf("operands have different dtypes %s and %s", first.dtype, v.dtype)
		}
	}
	return nil
}

// errDType reports an operand type the op does not accept.
func errDType(v *value, want string) error {
	return fmt.Errorf("dtype %s is not supported here (want %s)", v.dtype, want)
}
