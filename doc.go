// Package attnrun is the front door to attnrun from Go: one call loads a
// model, whatever its form, and runs it; a few helpers print, compare and
// save what comes out.
//
//	model, err := attnrun.Load("model.onnx") // or "model.yaml", or a preset name
//	y, err := model.Forward(ctx, x)          // x: a *tensor.Dense, float32 or float64
//	fmt.Println(attnrun.Format(y))           // as PyTorch prints it
//
// Load takes a YAML model config, the name of an embedded preset, or an
// ONNX file. A file attnrun wrote (attnrun export, attnrun import) becomes
// attnrun layers again, with its weights; any other ONNX file, a PyTorch
// export for instance, runs on attnrun's graph executor. The built-in
// layers are registered by this package's import of
// github.com/attnrun/attnrun/layers; a custom layer needs a blank import
// of its own package.
//
// Models built from layers also report their attention weights
// (AttentionWeights) and their parameters in PyTorch's state_dict names
// (StateDict), ready for tensorio.WriteNPZ. Compare and AllClose hold an
// output against a reference the way PyTorch's tests do, NaN-aware;
// CompareArrays, FormatArray and ReadArray do the same for array.Array
// values (float16, empty tensors), as the attnrun command does.
//
// The packages underneath stay available for what this one does not
// cover: models (configs, incremental decoding), registry (writing a
// layer), attnmath (the math a layer is made of), onnxio and its
// subpackages (reading, executing, lifting and exporting ONNX), tensorio
// (.npy, .npz, .safetensors).
package attnrun
