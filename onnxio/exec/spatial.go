package exec

import (
	"fmt"
	"slices"
)

// window is the geometry of a kernel sliding over the spatial axes of an
// (N, C, D1, ..., Dn) tensor, shared by Conv, ConvTranspose, the pools and
// Col2Im. The image is the tensor the kernel reads from (or, transposed,
// scatters into); out counts the window positions along each axis. Window
// position o covers image positions o·stride − padBegin + k·dilation for
// the kernel taps k.
type window struct {
	image     []int
	out       []int
	kernel    []int
	strides   []int
	dilations []int
	padBegin  []int
	padEnd    []int
}

// spatialInts reads an INTS attribute holding one positive value per
// spatial axis, or def for every axis when the node does not carry it.
func spatialInts(n *node, name string, axes, def int) ([]int, error) {
	v, ok := n.attrInts(name)
	if !ok {
		s := make([]int, axes)
		for i := range s {
			s[i] = def
		}
		return s, nil
	}
	if len(v) != axes {
		return nil, fmt.Errorf("attribute %s has %d values for %d spatial axes", name, len(v), axes)
	}
	s := make([]int, axes)
	for i, x := range v {
		if x < 1 || x > maxDimension {
			return nil, fmt.Errorf("attribute %s: value %d must be positive (and at most %d)", name, x, maxDimension)
		}
		s[i] = int(x)
	}
	return s, nil
}

// explicitPads reads the pads attribute (begin values of every spatial
// axis, then the end values); absent pads are zeros.
func explicitPads(n *node, axes int) (begin, end []int, err error) {
	begin, end = make([]int, axes), make([]int, axes)
	v, ok := n.attrInts("pads")
	if !ok {
		return begin, end, nil
	}
	if len(v) != 2*axes {
		return nil, nil, fmt.Errorf("attribute pads has %d values for %d spatial axes, want %d", len(v), axes, 2*axes)
	}
	for _, x := range v {
		if x < 0 || x > maxDimension {
			return nil, nil, fmt.Errorf("attribute pads: value %d must be in [0, %d]", x, maxDimension)
		}
	}
	for i := range axes {
		begin[i], end[i] = int(v[i]), int(v[axes+i])
	}
	return begin, end, nil
}

// kernelShape returns the kernel_shape attribute checked against the
// kernel's spatial sizes taken from the weights, or those sizes when the
// attribute is absent.
func kernelShape(n *node, fromWeights []int) ([]int, error) {
	v, ok := n.attrInts("kernel_shape")
	if !ok {
		return fromWeights, nil
	}
	if len(v) != len(fromWeights) || !slices.Equal(toInts(v), fromWeights) {
		return nil, fmt.Errorf("attribute kernel_shape %v does not match the weights' kernel %s", v, shapeString(fromWeights))
	}
	return fromWeights, nil
}

// toInts converts int64s to ints (for values already range-checked or
// only compared).
func toInts(v []int64) []int {
	s := make([]int, len(v))
	for i, x := range v {
		s[i] = int(x)
	}
	return s
}

// checkImages checks that X is a batch of images, (N, C, D1, ..., Dn)
// with at least one spatial axis.
func checkImages(x *value) error {
	if x.rank() < 3 {
		return fmt.Errorf("input X must be (N, C, D1, ...) with at least one spatial axis, got %s", shapeString(x.shape))
	}
	return nil
}

// slidingWindow works out how a kernel of the given spatial sizes slides
// over image from the node's strides, dilations, pads and auto_pad. With
// ceil, the number of positions rounds up (the pools' ceil_mode), except
// that a window starting in the end padding is dropped. auto_pad SAME_UPPER
// and SAME_LOWER give ceil(image/stride) positions, padding as evenly as
// possible with the odd element at the end (UPPER) or the beginning
// (LOWER); VALID pads nothing; NOTSET (the default) uses pads.
func slidingWindow(n *node, image, kernel []int, ceil bool) (*window, error) {
	w := &window{image: image, kernel: kernel, out: make([]int, len(image))}
	autoPad, err := w.readAttributes(n)
	if err != nil {
		return nil, err
	}
	for i, in := range image {
		s := w.strides[i]
		span, err := w.span(i)
		if err != nil {
			return nil, err
		}
		if autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER" {
			w.out[i] = (in + s - 1) / s
			total := max(0, (w.out[i]-1)*s+span-in)
			w.padBegin[i] = total / 2
			if autoPad == "SAME_LOWER" {
				w.padBegin[i] = total - total/2
			}
			w.padEnd[i] = total - w.padBegin[i]
			continue
		}
		avail := in + w.padBegin[i] + w.padEnd[i] - span
		if avail < 0 {
			return nil, fmt.Errorf("the kernel spans %d positions along spatial axis %d, more than the %d of the padded input", span, i, in+w.padBegin[i]+w.padEnd[i])
		}
		w.out[i] = avail/s + 1
		if ceil && autoPad != "VALID" {
			w.out[i] = (avail+s-1)/s + 1
			if (w.out[i]-1)*s >= in+w.padBegin[i] {
				w.out[i]--
			}
		}
	}
	return w, nil
}

// readAttributes reads the strides, dilations and auto_pad of a window
// with len(w.kernel) spatial axes, and its pads: the node's for auto_pad
// NOTSET, zeros (to be worked out) for the others.
func (w *window) readAttributes(n *node) (autoPad string, err error) {
	axes := len(w.kernel)
	if w.strides, err = spatialInts(n, "strides", axes, 1); err != nil {
		return "", err
	}
	if w.dilations, err = spatialInts(n, "dilations", axes, 1); err != nil {
		return "", err
	}
	autoPad = n.attrString("auto_pad", "NOTSET")
	switch autoPad {
	case "NOTSET", "":
		if w.padBegin, w.padEnd, err = explicitPads(n, axes); err != nil {
			return "", err
		}
	case "VALID", "SAME_UPPER", "SAME_LOWER":
		w.padBegin, w.padEnd = make([]int, axes), make([]int, axes)
	default:
		return "", fmt.Errorf("attribute auto_pad %q is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", autoPad)
	}
	return autoPad, nil
}

// span is the extent (k − 1)·dilation + 1 of the dilated kernel of k taps
// along spatial axis a, at most maxDimension.
func (w *window) span(a int) (int, error) {
	k, dilation := w.kernel[a], w.dilations[a]
	if k < 1 {
		return 0, fmt.Errorf("kernel size %d along spatial axis %d must be positive", k, a)
	}
	if span := mulSat(k-1, dilation); span < maxDimension {
		return span + 1, nil
	}
	return 0, fmt.Errorf("the kernel of %d taps dilated by %d along spatial axis %d spans more than %d positions", k, dilation, a, maxDimension)
}

// positions is the number of window positions.
func (w *window) positions() int { return numel(w.out) }

// taps is the number of kernel taps.
func (w *window) taps() int { return numel(w.kernel) }

// imageSize is the number of elements of one image plane.
func (w *window) imageSize() int { return numel(w.image) }

// pointwise reports whether the window reads the image unchanged: one tap,
// unit strides, no padding. im2col is then the identity.
func (w *window) pointwise() bool {
	if w.taps() != 1 || !slices.Equal(w.out, w.image) {
		return false
	}
	for i := range w.image {
		if w.strides[i] != 1 || w.padBegin[i] != 0 {
			return false
		}
	}
	return true
}

// offsets fills offs[t·P + o] (t a kernel tap, o a window position, both
// row-major; P = positions) with the row-major offset in the image plane
// of the element tap t covers at position o, or -1 where it covers
// padding. Every kernel op reads its image through this table.
func (w *window) offsets(offs []int64) {
	axes := len(w.image)
	strides := stridesOf(w.image)
	tap, pos := make([]int, axes), make([]int, axes)
	p := w.positions()
	for t := range w.taps() {
		row := offs[t*p : (t+1)*p]
		clear(pos)
		for o := range row {
			off := int64(0)
			for a := range axes {
				at := pos[a]*w.strides[a] - w.padBegin[a] + tap[a]*w.dilations[a]
				if at < 0 || at >= w.image[a] {
					off = -1
					break
				}
				off += int64(at * strides[a])
			}
			row[o] = off
			odometer(pos, w.out)
		}
		odometer(tap, w.kernel)
	}
}

// odometer advances a row-major multi-index within shape, wrapping to zero
// after the last index.
func odometer(idx, shape []int) {
	for a := len(idx) - 1; a >= 0; a-- {
		if idx[a]++; idx[a] < shape[a] {
			return
		}
		idx[a] = 0
	}
}

// allocOffsets reserves a tap table for w from the run's budget.
func allocOffsets(rc *runCtx, n *node, w *window) ([]int64, error) {
	offs, err := scratch[int64](rc, n, mulSat(w.taps(), w.positions()), "kernel tap offsets")
	if err != nil {
		return nil, err
	}
	w.offsets(offs)
	return offs, nil
}

// im2col copies the image planes of channels into the column matrix of a
// convolution: row c·taps + t holds, for every window position, the element
// tap t covers in channel c (zero in the padding).
func im2col[T number](col, img []T, offs []int64, channels, taps, positions, imageSize int) {
	tapRows(col, img, offs, channels, taps, positions, imageSize, func(plane, row []T, offs []int64) {
		for o, off := range offs {
			if off < 0 {
				row[o] = 0
			} else {
				row[o] = plane[off]
			}
		}
	})
}

// col2im is im2col's adjoint: it adds every column entry into the image
// element its tap covers, dropping those that fall in the padding.
func col2im[T number](img, col []T, offs []int64, channels, taps, positions, imageSize int) {
	tapRows(col, img, offs, channels, taps, positions, imageSize, func(plane, row []T, offs []int64) {
		for o, off := range offs {
			if off >= 0 {
				plane[off] += row[o]
			}
		}
	})
}

// tapRows calls f with each channel's image plane, the column-matrix row
// of each kernel tap in that channel, and the tap's offsets into the plane
// at every window position (-1 in the padding).
func tapRows[T number](col, img []T, offs []int64, channels, taps, positions, imageSize int, f func(plane, row []T, offs []int64)) {
	for c := range channels {
		plane := img[c*imageSize : (c+1)*imageSize]
		for t := range taps {
			f(plane, col[(c*taps+t)*positions:(c*taps+t+1)*positions], offs[t*positions:(t+1)*positions])
		}
	}
}
