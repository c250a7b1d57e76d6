// Package graph is the one model of an ONNX graph that the executor
// (package exec) and the lifter (package lift) share: nodes with their
// attributes, who produces and who reads each value, which values are
// static (known once the input shapes are) and which depend on the inputs'
// contents.
//
// Uses is the def-use index alone, generic over how values and nodes are
// named, so that the executor indexes its prepared nodes by value slot and
// the lifter indexes NodeProtos by value name with the same code. Graph is
// the index of a model's main graph by value name, with the static/data
// marks the lifter's pattern matching needs.
package graph
