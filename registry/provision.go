package registry

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gorgonia.org/tensor"
)

// Memory and parameters sized by a config.
//
// A config is a few bytes that can ask for gigabytes: `num_heads: 100000000`
// or `d_in: 65536`. A model therefore prepares the layers whose parameters
// their config sizes in a way that lets it refuse such a config before
// allocating anything: each such layer implements Provisioner, which lists
// its parameters' shapes (PlanParams) and allocates them from the model's
// memory budget (Provision). `attnrun inspect` describes a model from the
// shapes alone.

// ParamShape is a parameter's name and shape, known before the parameter
// is allocated.
type ParamShape struct {
	// Name is the state_dict name within the layer, as Params lists it.
	Name string
	// Shape is the parameter's shape.
	Shape []int
}

// Memory is a memory budget as a layer sees it: the model's, shared by all
// of its layers. Reserve before allocating anything whose size comes from
// the config; a refused reservation is an error naming what asked, how
// many bytes and the budget, which the layer returns as it is.
type Memory interface {
	// Reserve takes n bytes for what ("weight of shape (8, 8)"), or
	// returns an error and takes nothing. Negative n (overflowed size
	// arithmetic) is refused.
	Reserve(n int64, what string) error
	// Release gives back n bytes taken by Reserve.
	Release(n int64)
	// Limit is the budget's size in bytes; Used the bytes reserved so far.
	Limit() int64
	Used() int64
}

// Provisioner is the optional interface of layers whose configuration
// sizes the memory they allocate: their parameters, and anything else
// prepared from the config (a graph a layer decodes). A model prepares a
// Provisioner by calling Provision, with its budget, instead of Validate.
//
// Validate must remain a complete preparation on its own, for layers used
// outside a model: built-in layers implement it as Provision under a budget
// of their own (budget.DefaultLimit).
type Provisioner interface {
	Layer
	// PlanParams checks the configuration as Validate does and returns the
	// name and shape of every parameter Provision would allocate, in the
	// order Params will list them, allocating nothing sized by the config.
	// It does not modify the layer.
	PlanParams() ([]ParamShape, error)
	// Provision checks the configuration and prepares the layer as
	// Validate does, reserving from mem the bytes of its parameters, and of
	// anything else the config sizes, before allocating them. After a nil
	// return, Params lists exactly the parameters PlanParams listed.
	Provision(mem Memory) error
}

// OutputShaper is the optional interface of layers that know their output
// shape from their input shapes, without running: `attnrun inspect` and
// models.Model.Profile then describe a model (output shapes, FLOPs) with
// no parameter or activation allocated. A layer without it is run on
// zeros instead.
type OutputShaper interface {
	Layer
	// OutputShape returns the shape Forward returns for inputs of the
	// given shapes, in the order Forward takes them, or the error Forward
	// gives for shapes it does not accept. Like FLOPCounter.FLOPs, it reads
	// the exported config fields and works before Validate.
	OutputShape(inputs []tensor.Shape) (tensor.Shape, error)
}

// ParamOverhead is the memory a parameter takes beyond its float32
// elements: the tensor's header, shape and strides, its entry in the
// model's parameter list. ReserveParams counts it, so that a config asking
// for millions of tiny parameters is refused like one asking for a huge
// one.
const ParamOverhead = 512

// ReserveParams reserves from mem, at once, the bytes of the float32
// parameters of one layer: each one's elements plus ParamOverhead. The
// error names the largest parameter and its shape. Provisioners call it
// with their planned shapes before allocating.
func ReserveParams(mem Memory, shapes []ParamShape) error {
	if len(shapes) == 0 {
		return nil
	}
	total, largest, largestBytes := int64(0), 0, int64(-1)
	for i, p := range shapes {
		n := paramBytes(p.Shape)
		if n < 0 {
			total, largest = -1, i
			break
		}
		if n > largestBytes {
			largest, largestBytes = i, n
		}
		if total > math.MaxInt64-n {
			total = -1
			break
		}
		total += n
	}
	p := shapes[largest]
	what := fmt.Sprintf("parameter %s of shape %s", p.Name, formatShape(p.Shape))
	if len(shapes) > 1 {
		what = fmt.Sprintf("storage for %d parameters (the largest: %s of shape %s)", len(shapes), p.Name, formatShape(p.Shape))
	}
	return mem.Reserve(total, what)
}

// paramBytes is the memory of a float32 parameter of the given shape,
// ParamOverhead included, or -1 when a dimension is negative or the size
// overflows int64.
func paramBytes(shape []int) int64 {
	n := int64(4)
	for _, d := range shape {
		switch {
		case d < 0:
			return -1
		case d == 0:
			return ParamOverhead
		}
	}
	for _, d := range shape {
		if n > math.MaxInt64/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	if n > math.MaxInt64-ParamOverhead {
		return -1
	}
	return n + ParamOverhead
}

// formatShape writes a shape as array.FormatShape, attnrun's shape
// formatter, does (Python's tuples: (2, 3), (3,), ()); registry imports
// none of attnrun's packages, so it keeps this copy, which a test holds
// to array.FormatShape.
func formatShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
