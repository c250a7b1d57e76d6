package exec

// compare names a comparison op.
type compare int

const (
	opEqual compare = iota
	opLess
	opGreater
	opLessOrEqual
	opGreaterOrEqual
)

// compareFunc returns the element predicate of op for type T.
func compareFunc[T number](op compare) func(T, T) bool {
	switch op {
	case opEqual:
		return func(x, y T) bool { return x == y }
	case opLess:
		return func(x, y T) bool { return x < y }
	case opGreater:
		return func(x, y T) bool { return x > y }
	case opLessOrEqual:
		return func(x, y T) bool { return x <= y }
	default:
		return func(x, y T) bool { return x >= y }
	}
}

// compareOp is the kernel of Equal, Less, Greater, LessOrEqual and
// GreaterOrEqual: broadcast operands of one type in, bool out.
func compareOp(op compare) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		a, b := in[0], in[1]
		if err := sameDType(in); err != nil {
			return nil, err
		}
		switch a.dtype {
		case Bool:
			if op == opEqual {
				return oneOrErr(binaryMap(rc, n, a, b, Bool, func(x, y bool) bool { return x == y }))
			}
		case Float32:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[float32](op)))
		case Float64:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[float64](op)))
		case Int64:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[int64](op)))
		case Int32:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[int32](op)))
		case Int16:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[int16](op)))
		case Int8:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[int8](op)))
		case Uint64:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[uint64](op)))
		case Uint32:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[uint32](op)))
		case Uint16:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[uint16](op)))
		case Uint8:
			return oneOrErr(binaryMap(rc, n, a, b, Bool, compareFunc[uint8](op)))
		}
		return nil, errDType(a, "a numeric type")
	}
}

// logicalOp is the kernel of And, Or and Xor on bool tensors.
func logicalOp(f func(x, y bool) bool) opFunc {
	return func(rc *runCtx, n *node, in []*value) ([]*value, error) {
		for _, v := range in {
			if v.dtype != Bool {
				return nil, errDType(v, "bool")
			}
		}
		return oneOrErr(binaryMap(rc, n, in[0], in[1], Bool, f))
	}
}

// notOp is the kernel of Not.
func notOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	if in[0].dtype != Bool {
		return nil, errDType(in[0], "bool")
	}
	return oneOrErr(unaryMap(rc, n, in[0], Bool, func(x bool) bool { return !x }))
}

// whereOp is the kernel of Where: elements of x where cond holds, of y
// elsewhere, all three broadcast together.
func whereOp(rc *runCtx, n *node, in []*value) ([]*value, error) {
	c, x, y := in[0], in[1], in[2]
	if c.dtype != Bool {
		return nil, errDType(c, "bool for the condition")
	}
	if err := sameDType(in[1:]); err != nil {
		return nil, err
	}
	return oneOrErr(where(rc, n, c, x, y))
}

// where selects between x and y under cond in a new value allocated for
// node n; see whereOp.
func where(rc *runCtx, n *node, c, x, y *value) (*value, error) {
	switch x.dtype {
	case Float32:
		return whereT[float32](rc, n, c, x, y)
	case Float64:
		return whereT[float64](rc, n, c, x, y)
	case Int64:
		return whereT[int64](rc, n, c, x, y)
	case Int32:
		return whereT[int32](rc, n, c, x, y)
	case Int16:
		return whereT[int16](rc, n, c, x, y)
	case Int8:
		return whereT[int8](rc, n, c, x, y)
	case Uint64:
		return whereT[uint64](rc, n, c, x, y)
	case Uint32:
		return whereT[uint32](rc, n, c, x, y)
	case Uint16:
		return whereT[uint16](rc, n, c, x, y)
	case Uint8:
		return whereT[uint8](rc, n, c, x, y)
	case Bool:
		return whereT[bool](rc, n, c, x, y)
	}
	return nil, errDType(x, "a supported type")
}

// whereT is where for one element type.
func whereT[T element](rc *runCtx, n *node, c, x, y *value) (*value, error) {
	shape, err := broadcastShapes(c.shape, x.shape, y.shape)
	if err != nil {
		return nil, err
	}
	out, err := rc.alloc(n, x.dtype, shape)
	if err != nil {
		return nil, err
	}
	cs, xs, ys, o := c.data.([]bool), x.data.([]T), y.data.([]T), out.data.([]T)
	strides := [][]int{
		broadcastStrides(c.shape, shape), broadcastStrides(x.shape, shape),
		broadcastStrides(y.shape, shape), stridesOf(shape),
	}
	walk(shape, strides, func(off []int, n int, step []int) {
		ic, ix, iy := off[0], off[1], off[2]
		for i := range o[off[3] : off[3]+n] {
			if cs[ic] {
				o[off[3]+i] = xs[ix]
			} else {
				o[off[3]+i] = ys[iy]
			}
			ic += step[0]
			ix += step[1]
			iy += step[2]
		}
	})
	return out, nil
}
