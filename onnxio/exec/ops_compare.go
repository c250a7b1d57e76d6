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
		if a.dtype == Bool && op == opEqual {
			return oneOrErr(binaryMap(rc, n, a, b, Bool, func(x, y bool) bool { return x == y }))
		}
		k, err := numKindOf(a)
		if err != nil {
			return nil, err
		}
		return oneOrErr(k.compare(rc, n, op, a, b))
	}
}

// compare is the comparison op for type T.
func (numOf[T]) compare(rc *runCtx, n *node, op compare, a, b *value) (*value, error) {
	return binaryMap(rc, n, a, b, Bool, compareFunc[T](op))
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
	k, ok := elemKinds[x.dtype]
	if !ok {
		return nil, errDType(x, "a supported type")
	}
	return k.where(rc, n, c, x, y)
}

// where is where for element type T.
func (elemOf[T]) where(rc *runCtx, n *node, c, x, y *value) (*value, error) {
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
