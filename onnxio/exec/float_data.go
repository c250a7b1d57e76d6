package exec

// floatDType is the element type of Go type C.
func floatDType[C float]() DType {
	var zero C
	if _, ok := any(zero).(float32); ok {
		return Float32
	}
	return Float64
}

// floatData returns the elements of a float32 or float64 value as []C: its
// own data when it holds C (callers must not write into it), otherwise a
// converted copy reserved from the run's budget. A nil value gives nil.
func floatData[C float](rc *runCtx, n *node, v *value) ([]C, error) {
	if v == nil {
		return nil, nil
	}
	if d, ok := v.data.([]C); ok {
		return d, nil
	}
	c, err := rc.alloc(n, floatDType[C](), v.shape)
	if err != nil {
		return nil, err
	}
	d := c.data.([]C)
	convertTo(d, v.data)
	return d, nil
}

// floatValue returns data (of type C) as a value of element type dt and
// the given shape: data itself when it already has that type, otherwise a
// rounded copy reserved from the run's budget.
func floatValue[C float](rc *runCtx, n *node, dt DType, shape []int, data []C) (*value, error) {
	if floatDType[C]() == dt {
		return &value{dtype: dt, shape: shape, data: data}, nil
	}
	v, err := rc.alloc(n, dt, shape)
	if err != nil {
		return nil, err
	}
	convertData(v.data, data)
	return v, nil
}
