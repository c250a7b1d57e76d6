package exec

// Elementwise building blocks that allocate their result through the run's
// memory budget (rc.alloc), for the ops registered from the ops_*.go files.

// mapInto applies f to every element of x and returns a new value of type
// dt and x's shape.
func mapInto[T, R element](rc *runCtx, n *node, x *value, dt DType, f func(T) R) (*value, error) {
	out, err := rc.alloc(n, dt, x.shape)
	if err != nil {
		return nil, err
	}
	o := out.data.([]R)
	for i, e := range x.data.([]T) {
		o[i] = f(e)
	}
	return out, nil
}

// mapFloat applies g, computed in float64, to a float32 or float64 value;
// float32 results are rounded once.
func mapFloat(rc *runCtx, n *node, x *value, g func(float64) float64) (*value, error) {
	switch x.dtype {
	case Float32:
		return mapInto(rc, n, x, Float32, func(e float32) float32 { return float32(g(float64(e))) })
	case Float64:
		return mapInto(rc, n, x, Float64, g)
	}
	return nil, errDType(x, "float32 or float64")
}

// zipInto applies f elementwise to a and b under numpy broadcasting and
// returns a new value of type dt.
func zipInto[A, B, R element](rc *runCtx, n *node, a, b *value, dt DType, f func(A, B) R) (*value, error) {
	shape, err := broadcastShapes(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, dt, shape)
	if err != nil {
		return nil, err
	}
	x, y, o := a.data.([]A), b.data.([]B), out.data.([]R)
	strides := [][]int{broadcastStrides(a.shape, shape), broadcastStrides(b.shape, shape), stridesOf(shape)}
	walk(shape, strides, func(off []int, cnt int, step []int) {
		ia, ib, io := off[0], off[1], off[2]
		for range cnt {
			o[io] = f(x[ia], y[ib])
			ia += step[0]
			ib += step[1]
			io += step[2]
		}
	})
	return out, nil
}

// floatAttrOp is the kernel of a float-only elementwise op whose function
// depends on the node's attributes (Elu's alpha, Gelu's approximation).
func floatAttrOp(fn func(n *node) (func(float64) float64, error)) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		g, err := fn(n)
		if err != nil {
			return nil, err
		}
		return oneOrErr(mapFloat(rc, n, in[0], g))
	}
}

// floatFuncOp is the kernel of a float-only elementwise function.
func floatFuncOp(g func(float64) float64) opFunc {
	return floatAttrOp(func(*node) (func(float64) float64, error) { return g, nil })
}
