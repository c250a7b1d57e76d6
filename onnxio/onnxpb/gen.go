// Package onnxpb holds the Go types generated from onnx_subset.proto,
// attnrun's own subset of the ONNX model schema (proto package
// attnrun.onnxsubset, so that it can share a binary with libraries that
// register the real onnx.* names).
//
// Most code should go through package onnxio, which adds size limits,
// validation, external data and tensor conversions on top of these types.
//
// The generated file is committed; building needs neither protoc nor the
// plugin. To regenerate after editing onnx_subset.proto, install protoc
// (Debian: apt-get install protobuf-compiler) and the plugin at the version
// the module uses:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.6
//
// then run, in this directory:
//
//	go generate
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative onnx_subset.proto
