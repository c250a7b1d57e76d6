// Package match holds the structures of ONNX graphs that both the
// executor's fusions (package exec) and the lifter (package lift) look
// for, written once so that their rules cannot drift apart: the chain from
// a product of queries and keys to the Softmax over it (scores.go) and
// the bias Add of a linear layer (linear.go). It also holds the API through
// which layers teach the lifter their structure (pattern.go): layers
// register patterns here, without importing the lifter.
//
// The matchers are generic over how a graph names its nodes and values
// (the executor's prepared nodes and value slots, the lifter's NodeProtos
// and value names). Each caller says through a small view what it may
// follow: the executor only values no other node reads, checking numbers
// at run time; the lifter only values computed from the graph inputs,
// checking numbers at probe shapes.
package match
