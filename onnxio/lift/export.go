package lift

import (
	"errors"
	"fmt"

	"github.com/attnrun/attnrun/onnxio/export"
	"github.com/attnrun/attnrun/onnxio/onnxpb"
)

// Export writes a lifted model as an attnrun ONNX file that can replace
// src, the file it was lifted from: its graph inputs and outputs are
// declared exactly as src declares them (names, element types, ranks, fixed
// and symbolic dimensions), so that a runtime that ran src runs it on the
// same inputs. The model is exported as a graph of standard ops
// (export.Model) that adapts src's interface to the layers (see
// export.Interface: a (T, d) input is fed to the layers as (1, T, d), a bool
// mask as 0 and 1). attnrun run and check load the model from the file's
// metadata (Load) and take src's inputs as they are.
//
// When the model cannot be exported so (a layer has no ONNX exporter, src
// also returns attention weights, which an export does not compute), the
// file is src itself with the parameters added (Annotate): it keeps src's
// interface and nodes. The returned note says why; it is empty for an
// export. A file attnrun wrote is returned as it is.
func Export(src *onnxpb.ModelProto, res *Result, opts export.Options) (*onnxpb.ModelProto, string, error) {
	if res == nil || res.Model == nil {
		return nil, "", errors.New("export: no lifted model")
	}
	if res.Attnrun {
		return src, "the file was written by attnrun: its model is written back unchanged", nil
	}
	m, err := exportDropIn(src, res, opts)
	if err == nil {
		return m, "", nil
	}
	annotated, aerr := Annotate(src, res)
	if aerr != nil {
		return nil, "", fmt.Errorf("cannot write the lifted model: %v; %v", err, aerr)
	}
	return annotated, fmt.Sprintf("the model cannot be exported as attnrun's own graph (%v); the file keeps the source graph's nodes, with the parameters added as initializers", err), nil
}

// exportDropIn exports the model declaring src's interface.
func exportDropIn(src *onnxpb.ModelProto, res *Result, opts export.Options) (*onnxpb.ModelProto, error) {
	switch {
	case len(res.Outputs) == 0:
		return nil, errors.New("the lifted model has no outputs")
	case len(CacheInputs(res.Outputs)) > 0:
		return nil, errors.New("the graph passes a KV cache in and out (past and present), which an export does not declare")
	case len(res.ParamInputs) > 0:
		return nil, fmt.Errorf("the graph takes weights as inputs (%s), which an export holds as initializers", res.ParamInputs[0].Input)
	case len(res.Outputs) > 1:
		o := res.Outputs[1]
		if o.Weights == "" {
			return nil, fmt.Errorf("the graph also returns the output of layer %q (output %q); an export returns the model's output only", o.Layer, o.Name)
		}
		return nil, fmt.Errorf("the graph also returns the attention weights of layer %q (output %q), which an export does not compute", o.Layer, o.Name)
	}
	iface, err := sourceInterface(src, res)
	if err != nil {
		return nil, err
	}
	opts.Interface = iface
	return export.Model(res.Model, opts)
}

// sourceInterface reads how src declares the model's inputs (the graph
// inputs no initializer backs, the model's inputs in order) and its output.
func sourceInterface(src *onnxpb.ModelProto, res *Result) (*export.Interface, error) {
	g := src.GetGraph()
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	iface := &export.Interface{}
	for _, vi := range g.GetInput() {
		if !inits[vi.GetName()] {
			iface.Inputs = append(iface.Inputs, vi)
		}
	}
	for _, vi := range g.GetOutput() {
		if vi.GetName() == res.Outputs[0].Name {
			iface.Output = vi
		}
	}
	if iface.Output == nil {
		return nil, fmt.Errorf("the graph declares no output %q", res.Outputs[0].Name)
	}
	if len(g.GetOutput()) > 1 {
		return nil, fmt.Errorf("the graph has %d outputs; an export has the model's output only", len(g.GetOutput()))
	}
	return iface, nil
}
