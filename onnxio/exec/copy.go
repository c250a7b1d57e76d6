package exec

// view addresses elements of a data slice: element idx (a multi-index
// over shape) lives at offset + Σ idx[i]·strides[i]. Transpose, Slice,
// Expand, Tile, Concat, Split and Gather are all copies between views.
type view struct {
	offset  int
	strides []int
}

// contiguous is the view of a whole dense array of the given shape.
func contiguous(shape []int) view { return view{strides: stridesOf(shape)} }

// copyView copies the elements of shape from src (read through sv) into
// dst (written through dv). Both slices hold the same element type.
func copyView(dst any, dv view, src any, sv view, shape []int) {
	elemKindOfData(dst).copyView(dst, dv, src, sv, shape)
}

// copyView is copyView for type T.
func (elemOf[T]) copyView(dd any, dv view, sd any, sv view, shape []int) {
	dst, src := dd.([]T), sd.([]T)
	walk(shape, [][]int{dv.strides, sv.strides}, func(off []int, n int, step []int) {
		d, s := dv.offset+off[0], sv.offset+off[1]
		if step[0] == 1 && step[1] == 1 {
			copy(dst[d:d+n], src[s:s+n])
			return
		}
		for range n {
			dst[d] = src[s]
			d += step[0]
			s += step[1]
		}
	})
}

// gatherBlocks is Gather's copy: src is (outer, d, inner) and dst (outer,
// len(rows), inner), and row j of dst is row rows[j] of src (from the end
// when negative; the caller checked the range).
func (elemOf[T]) gatherBlocks(dd, sd any, rows []int64, d, outer, inner int) {
	dst, src := dd.([]T), sd.([]T)
	m := len(rows)
	for o := range outer {
		for j, i := range rows {
			if i < 0 {
				i += int64(d)
			}
			copy(dst[(o*m+j)*inner:][:inner], src[(o*d+int(i))*inner:][:inner])
		}
	}
}

// gather returns a new contiguous value of the given shape, allocated for
// node n, holding the elements of v read through sv.
func gather(rc *runCtx, n *node, v *value, sv view, shape []int) (*value, error) {
	out, err := rc.alloc(n, v.dtype, shape)
	if err != nil {
		return nil, err
	}
	copyView(out.data, contiguous(shape), v.data, sv, shape)
	return out, nil
}
