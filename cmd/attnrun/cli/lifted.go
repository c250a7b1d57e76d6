package cli

import (
	"fmt"
	"io"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/models"
	"github.com/attnrun/attnrun/onnxio"
	"github.com/attnrun/attnrun/onnxio/exec"
	"github.com/attnrun/attnrun/onnxio/lift"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
	"github.com/attnrun/attnrun/registry"
)

// liftedFile is an ONNX file attnrun wrote (attnrun export, attnrun
// import): a model of attnrun layers with its weights, which run and check
// execute on the layers themselves rather than on the graph.
type liftedFile struct {
	model   *models.Model
	outputs []lift.Output
	// narrow holds the float16 and bfloat16 outputs the file declares, by
	// position: the layers compute them in float32, rounded at the end.
	narrow map[int]array.DType
	// binds are the graph inputs that hold parameters (lift.ParamInput),
	// and inputs all the file's graph inputs, in order, when there are any.
	binds  []lift.ParamInput
	inputs []string
}

// openLifted prepares an attnrun file to run on its layers.
func openLifted(lim *limits, m *onnxpb.ModelProto) (*liftedFile, error) {
	model, outputs, err := lim.loadAttnrun(m)
	if err != nil {
		return nil, err
	}
	binds, err := lift.ReadParamInputs(m)
	if err != nil {
		return nil, err
	}
	f := &liftedFile{model: model, outputs: outputs, narrow: narrowOutputs(m, outputs), binds: binds}
	if len(binds) > 0 {
		inits := map[string]bool{}
		for _, t := range m.GetGraph().GetInitializer() {
			inits[t.GetName()] = true
		}
		for _, vi := range m.GetGraph().GetInput() {
			if !inits[vi.GetName()] {
				f.inputs = append(f.inputs, vi.GetName())
			}
		}
	}
	return f, nil
}

// bind loads the inputs that hold parameters into the model and returns
// the others, the model's inputs.
func (f *liftedFile) bind(inputs []*tensor.Dense) ([]*tensor.Dense, error) {
	if len(f.binds) == 0 {
		return inputs, nil
	}
	bound := map[string]bool{}
	for _, b := range f.binds {
		bound[b.Input] = true
	}
	feeds := map[string]*tensor.Dense{}
	var args []*tensor.Dense
	for i, name := range f.inputs {
		if bound[name] {
			feeds[name] = inputs[i]
		} else {
			args = append(args, inputs[i])
		}
	}
	if err := lift.BindParamInputs(f.model, f.binds, feeds); err != nil {
		return nil, err
	}
	return args, nil
}

// onnxFile is an ONNX file ready to run: on attnrun's layers when attnrun
// wrote it, on the graph executor otherwise (or when executor is set).
type onnxFile struct {
	graph  *exec.Graph
	lifted *liftedFile
	lim    *limits
	// source is the file as read, which --attention copies to add the
	// weights to the graph's outputs.
	source *onnxpb.ModelProto
	// chunk, when positive, runs a file of attnrun layers chunk tokens
	// at a time through the layers' caches (run --incremental).
	chunk int
}

// openONNX reads an ONNX file once and prepares it for run and check,
// within the command's limits. What the executor accepts only because ONNX
// Runtime does (Graph.Warnings) is printed to warn.
func openONNX(warn io.Writer, lim *limits, path string, executor bool) (*onnxFile, error) {
	m, err := lim.readModel(path)
	if err != nil {
		return nil, err
	}
	if !executor && lift.IsAttnrun(m) {
		lifted, err := openLifted(lim, m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (run it on the graph with --executor)", path, err)
		}
		return &onnxFile{lifted: lifted, lim: lim}, nil
	}
	g, err := lim.newGraph(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, w := range g.Warnings() {
		fmt.Fprintf(warn, "attnrun: warning: %s: %s\n", path, w)
	}
	return &onnxFile{graph: g, lim: lim, source: m}, nil
}

// inputNames lists what the file takes, for messages.
func (f *onnxFile) inputNames() string {
	if f.graph != nil {
		return describeInfos(f.graph.Inputs())
	}
	if len(f.lifted.binds) > 0 {
		return fmt.Sprint(f.lifted.inputs)
	}
	return fmt.Sprint(append(f.lifted.model.Config().Inputs, lift.CacheInputs(f.lifted.outputs)...))
}

// numInputs is how many tensors a run needs.
func (f *onnxFile) numInputs() int {
	if f.graph != nil {
		return len(f.graph.Inputs())
	}
	if len(f.lifted.binds) > 0 {
		return len(f.lifted.inputs)
	}
	return len(f.lifted.model.Config().Inputs) + len(lift.CacheInputs(f.lifted.outputs))
}

// outputNames names the outputs, in order.
func (f *onnxFile) outputNames() []string {
	var names []string
	if f.graph != nil {
		for _, o := range f.graph.Outputs() {
			names = append(names, o.Name)
		}
		return names
	}
	for _, o := range f.lifted.outputs {
		names = append(names, o.Name)
	}
	return names
}

// run computes every output from the inputs, given in order.
func (f *onnxFile) run(inputs []*tensor.Dense) ([]*tensor.Dense, error) {
	if f.graph != nil {
		feeds := map[string]*tensor.Dense{}
		for i, info := range f.graph.Inputs() {
			feeds[info.Name] = inputs[i]
		}
		outs, err := f.lim.runGraph(f.graph, feeds)
		if err != nil {
			return nil, err
		}
		var res []*tensor.Dense
		for _, o := range f.graph.Outputs() {
			res = append(res, outs[o.Name])
		}
		return res, nil
	}
	inputs, err := f.lifted.bind(inputs)
	if err != nil {
		return nil, err
	}
	args := make([]*tensor.Dense, len(inputs))
	for i, x := range inputs {
		var err error
		if args[i], err = lift.ModelInput(x); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	return lift.RunOutputs(f.lifted.model, f.lifted.outputs, &registry.Run{Context: f.lim.ctx}, args)
}

// runArrays computes every output from the inputs, given in order, as
// Arrays: the graph executor carries tensors of zero elements and float16
// values; attnrun's layers take and give *tensor.Dense.
func (f *onnxFile) runArrays(inputs []*array.Array) ([]*array.Array, error) {
	if f.graph != nil {
		feeds := map[string]*array.Array{}
		for i, info := range f.graph.Inputs() {
			feeds[info.Name] = inputs[i]
		}
		outs, err := f.graph.RunArrays(f.lim.ctx, feeds)
		if err != nil {
			return nil, err
		}
		res := make([]*array.Array, len(f.graph.Outputs()))
		for i, o := range f.graph.Outputs() {
			res[i] = outs[o.Name]
		}
		return res, nil
	}
	if past := lift.CacheInputs(f.lifted.outputs); len(past) > 0 || f.chunk > 0 {
		return f.runCache(inputs, past) // lifted_cache.go
	}
	dense := make([]*tensor.Dense, len(inputs))
	for i, a := range inputs {
		d, err := a.Dense()
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		dense[i] = d
	}
	outs, err := f.run(dense)
	if err != nil {
		return nil, err
	}
	res, err := outputArrays(outs)
	if err != nil {
		return nil, err
	}
	for i, a := range res {
		if dt, ok := f.lifted.narrow[i]; ok && a.DType == array.Float32 {
			values := a.Data.([]float32)
			for k, v := range values {
				values[k] = array.RoundFloat(dt, float64(v), false)
			}
			a.DType = dt
		}
	}
	return res, nil
}

// outputArrays converts a run's outputs to arrays.
func outputArrays(outs []*tensor.Dense) ([]*array.Array, error) {
	res := make([]*array.Array, len(outs))
	for i, d := range outs {
		var err error
		if res[i], err = array.FromDense(d); err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
	}
	return res, nil
}

// narrowOutputs finds the outputs of a lifted file that it declares
// float16 or bfloat16 (a float16 graph lifted into float32 layers).
func narrowOutputs(m *onnxpb.ModelProto, outputs []lift.Output) map[int]array.DType {
	declared := map[string]onnxio.DataType{}
	for _, vi := range m.GetGraph().GetOutput() {
		declared[vi.GetName()] = onnxio.ElemType(vi)
	}
	narrow := map[int]array.DType{}
	for i, o := range outputs {
		switch declared[o.Name] {
		case onnxio.Float16:
			narrow[i] = array.Float16
		case onnxio.BFloat16:
			narrow[i] = array.BFloat16
		}
	}
	return narrow
}

// runONNX executes an ONNX file on --input tensors given in the order of
// its inputs (or --random-input ones), and prints the outputs or writes
// them (writeOutputs); with --attention, the weights of that layer (on
// attnrun's layers) or graph node (on the executor) instead.
func runONNX(stdout, stderr io.Writer, lim *limits, path string, f runFlags) error {
	file, err := openONNX(stderr, lim, path, f.executor)
	if err != nil {
		return err
	}
	given := len(f.inputs) + len(f.randomInputs)
	if given != file.numInputs() {
		return usageError{fmt.Errorf("%s takes %d input(s) (%s), got %d --input", path, file.numInputs(), file.inputNames(), given)}
	}
	if f.incremental > 0 {
		if file.lifted == nil {
			return usageError{fmt.Errorf("%s: --incremental runs attnrun layers (a config, a preset, a file attnrun wrote), not ONNX files on the executor; attnrun import lifts a PyTorch export into layers", path)}
		}
		file.chunk = f.incremental
	}
	names := file.outputNames()
	if f.attention != "" {
		names = []string{f.attention}
	}
	dest, err := outputDestination(path, names, f.outputs)
	if err != nil {
		return err
	}
	inputs, err := onnxInputs(lim, f)
	if err != nil {
		return err
	}
	var outs []*array.Array
	if f.attention != "" {
		w, err := file.attention(path, f.attention, inputs)
		if err != nil {
			return err
		}
		outs = []*array.Array{w}
	} else if outs, err = file.runArrays(inputs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return dest.write(stdout, names, outs)
}

// onnxInputs reads the --input files, or draws the --random-input ones.
func onnxInputs(lim *limits, f runFlags) ([]*array.Array, error) {
	var inputs []*array.Array
	for _, p := range f.inputs {
		a, err := lim.readArray(p)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, a)
	}
	random, err := f.randomTensors()
	if err != nil {
		return nil, err
	}
	for _, d := range random {
		a, err := array.FromDense(d)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, a)
	}
	return inputs, nil
}

// attention returns the attention weights --attention names: a layer's,
// through the hook, on attnrun's layers; a graph value on the executor
// (graphAttention).
func (f *onnxFile) attention(path, name string, inputs []*array.Array) (*array.Array, error) {
	if f.graph != nil {
		return graphAttention(f.lim, path, f.source, name, inputs)
	}
	args := make([]*tensor.Dense, len(inputs))
	for i, a := range inputs {
		d, err := a.Dense()
		if err == nil {
			d, err = lift.ModelInput(d)
		}
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		args[i] = d
	}
	w, err := forward(&source{model: f.lifted.model, lim: f.lim}, &registry.Run{Context: f.lim.ctx}, args, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return array.FromDense(w)
}
