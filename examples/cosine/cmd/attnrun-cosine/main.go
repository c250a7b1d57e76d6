// Command attnrun-cosine is attnrun with one more layer: the whole attnrun
// command line (layers, presets, run, ...) plus attention.cosine from the
// example package, which registers itself when imported.
//
//	go run ./cmd/attnrun-cosine layers
//	go run ./cmd/attnrun-cosine run testdata/cosine.yaml \
//	    --weights testdata/cosine_weights.npz --input testdata/cosine_input.npy
package main

import (
	"github.com/attnrun/attnrun/cmd/attnrun/cli"

	_ "github.com/attnrun/attnrun/examples/cosine" // registers attention.cosine
)

func main() { cli.Main() }
