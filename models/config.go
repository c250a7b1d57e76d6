package models

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/yamlkeys"
	"github.com/attnrun/attnrun/registry"
)

// Config is a model as written in YAML: named layers, run in order, each
// taking the previous output unless it names its inputs.
type Config struct {
	// Name identifies the model (presets use it as their name).
	Name string
	// Description is one line for listings.
	Description string
	// Inputs names the model's inputs, in the order Forward takes them.
	Inputs []string
	// InputDtypes holds the element type of each input, parallel to
	// Inputs: tensor.Float32 (the default) or tensor.Int64 (token ids,
	// masks, positions). Nil, as in a Config built by hand, means every
	// input is float32; InputDtype reads it either way.
	InputDtypes []tensor.Dtype
	// Output names the layer whose output the model returns.
	Output string
	// Layers are the model's layers in config order.
	Layers []LayerSpec
	// Source is the file the config came from, for error messages.
	Source string
	// YAML is the config text as given, kept so exports can carry it.
	YAML []byte

	// budget is what the config's layers reserved their memory from;
	// shapesOnly says their parameters were planned, not allocated.
	budget     *budget.Budget
	shapesOnly bool
}

// LayerSpec is one entry of a config's layer list.
type LayerSpec struct {
	// Name is unique within the model and prefixes the layer's parameters.
	Name string
	// Type is the registry ID.
	Type string
	// Inputs names the model inputs or earlier layers this layer reads.
	Inputs []string
	// Line is where the entry starts in the source, for error messages.
	Line int
	// Layer is the decoded and validated layer.
	Layer registry.Layer
	// Params lists the layer's parameters, names within the layer and
	// shapes, in Params order, whether or not they are allocated (see
	// Options.ShapesOnly).
	Params []registry.ParamShape
}

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseConfig decodes and validates a model config. source names the file in
// errors ("model.yaml:7: layer \"attn\": unknown field \"num_head\""). Decoding
// is strict: unknown fields, unknown layer types, duplicate names and
// references to layers that do not exist (or come later) are errors. The
// layers' parameters are allocated within budget.DefaultLimit; Options
// sets another budget.
func ParseConfig(data []byte, source string) (*Config, error) {
	return Options{}.ParseConfig(data, source)
}

// parseConfig is ParseConfig with options.
func parseConfig(data []byte, source string, opts Options) (*Config, error) {
	if source == "" {
		source = "config"
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty model config", source)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: model config must be a mapping with name and layers", source, root.Line)
	}
	cfg := &Config{Source: source, YAML: data, budget: budget.New(opts.MaxMemory), shapesOnly: opts.ShapesOnly}
	var layersNode *yaml.Node
	for i := 0; i < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		var err error
		switch key.Value {
		case "name":
			err = val.Decode(&cfg.Name)
		case "description":
			err = val.Decode(&cfg.Description)
		case "inputs":
			cfg.Inputs, cfg.InputDtypes, err = parseInputs(val)
		case "output":
			err = val.Decode(&cfg.Output)
		case "layers":
			layersNode = val
		default:
			return nil, fmt.Errorf("%s:%d: unknown field %q in model config (want name, description, inputs, output, layers)",
				source, key.Line, key.Value)
		}
		if err != nil {
			return nil, decodeError(source, val.Line, key.Value, err)
		}
	}
	if cfg.Name == "" {
		return nil, fmt.Errorf("%s: model config needs a name", source)
	}
	if len(cfg.Inputs) == 0 {
		cfg.Inputs, cfg.InputDtypes = []string{"x"}, []tensor.Dtype{tensor.Float32}
	}
	if layersNode == nil || layersNode.Kind != yaml.SequenceNode || len(layersNode.Content) == 0 {
		return nil, fmt.Errorf("%s: model %q needs a non-empty list of layers", source, cfg.Name)
	}
	known := map[string]bool{}
	for _, in := range cfg.Inputs {
		if !namePattern.MatchString(in) {
			return nil, fmt.Errorf("%s: input name %q is not an identifier", source, in)
		}
		if known[in] {
			return nil, fmt.Errorf("%s: input %q is listed twice", source, in)
		}
		known[in] = true
	}
	previous := cfg.Inputs[0]
	for _, n := range layersNode.Content {
		spec, err := parseLayer(n, source, cfg)
		if err != nil {
			return nil, err
		}
		if known[spec.Name] {
			return nil, fmt.Errorf("%s:%d: layer name %q is already used", source, spec.Line, spec.Name)
		}
		if len(spec.Inputs) == 0 {
			spec.Inputs = []string{previous}
		}
		for _, in := range spec.Inputs {
			if !known[in] {
				return nil, fmt.Errorf("%s:%d: layer %q reads %q, which is neither a model input nor an earlier layer",
					source, spec.Line, spec.Name, in)
			}
		}
		known[spec.Name] = true
		previous = spec.Name
		cfg.Layers = append(cfg.Layers, spec)
	}
	if cfg.Output == "" {
		cfg.Output = previous
	} else if !known[cfg.Output] {
		return nil, fmt.Errorf("%s: output %q is neither a model input nor a layer", source, cfg.Output)
	}
	return cfg, nil
}

// InputDtype returns the element type of input i: what InputDtypes says,
// float32 where it says nothing.
func (c *Config) InputDtype(i int) tensor.Dtype {
	if i < len(c.InputDtypes) && c.InputDtypes[i] != (tensor.Dtype{}) {
		return c.InputDtypes[i]
	}
	return tensor.Float32
}

// inputDtypes are the element types a model input may declare, by the
// names configs write them with (PyTorch's and ONNX's names).
var inputDtypes = map[string]tensor.Dtype{"float32": tensor.Float32, "int64": tensor.Int64}

// parseInputs decodes a config's inputs: a list whose entries are a name
// (a float32 input, as every config had before typed inputs) or a mapping
// {name, dtype}, such as {name: input_ids, dtype: int64}.
func parseInputs(n *yaml.Node) ([]string, []tensor.Dtype, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, nil, fmt.Errorf("line %d: inputs must be a list of names or {name, dtype} entries", n.Line)
	}
	names := make([]string, len(n.Content))
	dtypes := make([]tensor.Dtype, len(n.Content))
	for i, item := range n.Content {
		entry := struct {
			Name  string `yaml:"name"`
			Dtype string `yaml:"dtype"`
		}{Dtype: "float32"}
		switch item.Kind {
		case yaml.ScalarNode:
			entry.Name = item.Value
		case yaml.MappingNode:
			if err := item.Decode(&entry); err != nil {
				return nil, nil, err
			}
			for j := 0; j < len(item.Content); j += 2 {
				if key := item.Content[j].Value; key != "name" && key != "dtype" {
					return nil, nil, fmt.Errorf("line %d: unknown field %q in input (want name, dtype)", item.Content[j].Line, key)
				}
			}
		default:
			return nil, nil, fmt.Errorf("line %d: an input is a name or a {name, dtype} mapping", item.Line)
		}
		dt, ok := inputDtypes[entry.Dtype]
		if !ok {
			return nil, nil, fmt.Errorf("line %d: input %q has dtype %q (want float32 or int64)", item.Line, entry.Name, entry.Dtype)
		}
		names[i], dtypes[i] = entry.Name, dt
	}
	return names, dtypes, nil
}

// parseLayer decodes one layer entry: name, type and inputs are the model's;
// every other key must be a field of the layer type's config. The layer is
// then prepared within the config's budget.
func parseLayer(n *yaml.Node, source string, cfg *Config) (LayerSpec, error) {
	spec := LayerSpec{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return spec, fmt.Errorf("%s:%d: a layer must be a mapping with name and type", source, n.Line)
	}
	fields := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	var keys []*yaml.Node
	for i := 0; i < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		var err error
		switch key.Value {
		case "name":
			err = val.Decode(&spec.Name)
		case "type":
			err = val.Decode(&spec.Type)
		case "inputs":
			err = val.Decode(&spec.Inputs)
		default:
			fields.Content = append(fields.Content, key, val)
			keys = append(keys, key)
		}
		if err != nil {
			return spec, decodeError(source, val.Line, "layer "+key.Value, err)
		}
	}
	if spec.Name == "" {
		return spec, fmt.Errorf("%s:%d: layer needs a name", source, n.Line)
	}
	if !namePattern.MatchString(spec.Name) || strings.Contains(spec.Name, ".") {
		return spec, fmt.Errorf("%s:%d: layer name %q is not an identifier", source, n.Line, spec.Name)
	}
	where := fmt.Sprintf("layer %q", spec.Name)
	if spec.Type == "" {
		return spec, fmt.Errorf("%s:%d: %s needs a type (one of: %s)", source, n.Line, where, strings.Join(registry.IDs(), ", "))
	}
	info, err := registry.Lookup(spec.Type)
	if err != nil {
		return spec, fmt.Errorf("%s:%d: %s: %v", source, n.Line, where, err)
	}
	where = fmt.Sprintf("layer %q (%s)", spec.Name, spec.Type)
	layer := info.New()
	allowed := yamlkeys.Of(reflect.TypeOf(layer))
	for _, key := range keys {
		if !allowed[key.Value] {
			return spec, fmt.Errorf("%s:%d: %s: unknown field %q (fields: %s)",
				source, key.Line, where, key.Value, strings.Join(yamlkeys.Sorted(allowed), ", "))
		}
	}
	if err := fields.Decode(layer); err != nil {
		return spec, decodeError(source, n.Line, where, err)
	}
	shapes, err := prepareLayer(layer, cfg.budget, cfg.shapesOnly)
	if err != nil {
		return spec, fmt.Errorf("%s:%d: %s: %w", source, n.Line, where, err)
	}
	spec.Layer, spec.Params = layer, shapes
	return spec, nil
}

// decodeError reports a YAML decoding error as "source:line: where: what",
// taking the line from yaml's own "line N: ..." message when it has one.
func decodeError(source string, line int, where string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	msg = strings.TrimSpace(strings.TrimPrefix(msg, "yaml: "))
	msg = strings.ReplaceAll(msg, "\n ", ";")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, after
			}
		}
	}
	return fmt.Errorf("%s:%d: %s: %s", source, line, where, msg)
}
