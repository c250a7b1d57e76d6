// Package export writes attnrun models as ONNX graphs of standard ops:
// Model turns a *models.Model into an onnxpb.ModelProto, each layer through
// its registry.Exporter, with the model's YAML config in the metadata so
// that an importer rebuilds it losslessly. Package onnxio encodes the result
// (onnxio.EncodeModel, onnxio.WriteModel).
package export
