// Command attnrun runs attention models: built-in presets, YAML configs and
// ONNX files. See `attnrun --help`.
package main

import "github.com/attnrun/attnrun/cmd/attnrun/cli"

func main() { cli.Main() }
