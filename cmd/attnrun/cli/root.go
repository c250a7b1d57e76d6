// Package cli is the attnrun command line, importable so that a program with
// its own layers can be a complete attnrun:
//
//	package main
//
//	import (
//		"github.com/attnrun/attnrun/cmd/attnrun/cli"
//		_ "example.com/mylayers" // registers attention.cosine
//	)
//
//	func main() { cli.Main() }
package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/attnrun/attnrun/internal/atomicfile"
	_ "github.com/attnrun/attnrun/layers" // the built-in layers
)

// Main runs the command line with os.Args and exits with its status.
func Main() {
	atomicfile.CleanUpOnSignals() // Ctrl-C mid-write leaves no temporary file
	os.Exit(Run(os.Args[1:], os.Stdout, os.Stderr))
}

// Run executes the command line with the given arguments and returns the
// exit status: 0 on success, 1 on a failed check or error, 2 on misuse.
func Run(args []string, stdout, stderr io.Writer) (status int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "attnrun: internal error: %v\n", r)
			status = 1
		}
	}()
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(stderr, "attnrun: %v\n", err)
		if _, misuse := err.(usageError); misuse {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks errors in how the command was called.
type usageError struct{ error }

// NewRoot builds the attnrun command tree writing to the given streams.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "attnrun",
		Short: "Run, check and convert attention models",
		Long: `attnrun runs attention layers assembled from YAML configs, the presets built
into it, and ONNX files, and cross-checks them against PyTorch's numbers.`,
		Example: `  attnrun presets
  attnrun run seed-mha-wrapper
  attnrun layers`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newLayersCommand(), newPresetsCommand(), newRunCommand(), newCheckCommand(), newInspectCommand(),
		newExportCommand(), newImportCommand(), newPlotCommand(), newBenchCommand(), newGenerateCommand())
	return root
}
