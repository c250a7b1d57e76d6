package models

import (
	"fmt"
	"path/filepath"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/regularfile"
	"github.com/attnrun/attnrun/registry"
)

// Options bound what building a model may take, for configs that come
// from strangers: a few bytes of YAML can ask for gigabytes of parameters.
// The zero value applies budget.DefaultLimit.
type Options struct {
	// MaxMemory is the memory budget in bytes of everything the config
	// sizes: the parameters of every layer (each counted with
	// registry.ParamOverhead) and what layers allocate while preparing (a
	// graph an onnx.subgraph layer decodes). A config over it is an error
	// naming the layer, the largest parameter, its shape and the bytes,
	// returned before anything is allocated for the layers that plan their
	// parameters (registry.Provisioner, every built-in). Zero or less
	// means budget.DefaultLimit.
	MaxMemory int64
	// ShapesOnly builds a model that describes itself but cannot run:
	// layers that plan their parameters are checked and their parameters
	// listed (LayerSpec.Params), not allocated. NumParams and Profile work;
	// Forward, Init and loading weights are errors. `attnrun inspect` uses
	// it to describe a model of any size without allocating it.
	ShapesOnly bool
}

// ParseConfig decodes and validates a model config as the package-level
// ParseConfig does, preparing its layers within the options' budget.
func (o Options) ParseConfig(data []byte, source string) (*Config, error) {
	return parseConfig(data, source, o)
}

// Parse parses a YAML config and builds the model in one step.
func (o Options) Parse(data []byte, source string) (*Model, error) {
	cfg, err := o.ParseConfig(data, source)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// Load reads a YAML model config from a file and builds the model. The
// file must be a regular file of at most 64 MiB.
func (o Options) Load(path string) (*Model, error) {
	data, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	return o.Parse(data, filepath.Base(path))
}

// maxConfigBytes bounds a config file read into memory: configs are text,
// and even one carrying an ONNX subgraph is far below it.
const maxConfigBytes = 64 << 20

// readConfigFile reads a config file: a regular file (a FIFO would block,
// a device never end) of at most maxConfigBytes.
func readConfigFile(path string) ([]byte, error) {
	return regularfile.ReadFile(path, maxConfigBytes)
}

// prepareLayer checks a decoded layer and allocates its parameters from
// mem, returning the names and shapes of its parameters. A Provisioner is
// planned (ShapesOnly) or provisioned from mem; any other layer is
// validated as before, and its parameters, allocated by Validate, are then
// reserved, so that they count against the budget all the same.
func prepareLayer(l registry.Layer, mem *budget.Budget, shapesOnly bool) (shapes []registry.ParamShape, err error) {
	defer func() {
		if r := recover(); r != nil { // a bug in a layer, perhaps someone else's
			shapes, err = nil, fmt.Errorf("preparing the layer panicked: %v", r)
		}
	}()
	if p, ok := l.(registry.Provisioner); ok {
		if shapesOnly {
			return p.PlanParams()
		}
		if err := p.Provision(mem); err != nil {
			return nil, err
		}
		return paramShapes(l.Params()), nil
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	shapes = paramShapes(l.Params())
	if err := registry.ReserveParams(mem, shapes); err != nil {
		return nil, err
	}
	return shapes, nil
}

// paramShapes lists the names and shapes of allocated parameters.
func paramShapes(params []registry.Param) []registry.ParamShape {
	shapes := make([]registry.ParamShape, len(params))
	for i, p := range params {
		shapes[i] = registry.ParamShape{Name: p.Name, Shape: []int(p.Value.Shape().Clone())}
	}
	return shapes
}
