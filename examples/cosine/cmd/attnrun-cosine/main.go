// Command attnrun-cosine is attnrun with one more layer: the whole attnrun
// command line (layers, presets, run, export, import, ...) plus
// attention.cosine from the example package, which registers the layer and
// its lifting pattern when imported.
//
//	go run ./cmd/attnrun-cosine layers
//	go run ./cmd/attnrun-cosine run testdata/cosine.yaml \
//	    --weights testdata/cosine_weights.npz --input testdata/cosine_input.npy
//	go run ./cmd/attnrun-cosine export testdata/cosine.yaml \
//	    --weights testdata/cosine_weights.npz -o cos.onnx
//	go run ./cmd/attnrun-cosine import testdata/cosine_torch.onnx -o lifted.onnx
package main

import (
	"github.com/attnrun/attnrun/cmd/attnrun/cli"

	_ "github.com/attnrun/attnrun/examples/cosine" // registers attention.cosine and its lifting pattern
)

func main() { cli.Main() }
