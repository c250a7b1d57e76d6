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
	"strings"

	"github.com/spf13/cobra"

	"github.com/attnrun/attnrun/internal/atomicfile"
	_ "github.com/attnrun/attnrun/layers" // the built-in layers
	"github.com/attnrun/attnrun/models"
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
	err := unknownCommand(root, args)
	if err == nil {
		err = root.Execute()
	}
	if err != nil {
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
		Example: `  attnrun presets                         # the models built in
  attnrun run seed-mha-wrapper            # run one
  attnrun input 1,6,3 -o x.npy            # make an input
  attnrun run model.yaml --seed 1 --input x.npy
  attnrun plot seed-masked-weights -o attn.png
  attnrun layers attention.causal         # a layer's fields and parameters`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentPreRunE = checkArguments
	root.SetHelpTemplate(helpTemplate)
	root.SetUsageTemplate(helpTemplate)
	root.SuggestionsMinimumDistance = 2
	root.AddCommand(newLayersCommand(), newPresetsCommand(), newRunCommand(), newCheckCommand(), newInspectCommand(),
		newExportCommand(), newImportCommand(), newPlotCommand(), newBenchCommand(), newGenerateCommand(), newInputCommand(), newVersionCommand())
	for _, c := range root.Commands() {
		if modelCommands[c.Name()] {
			c.ValidArgsFunction = completeModel
		}
	}
	return root
}

// unknownCommand refuses a first argument that names no command before
// cobra sees it, as misuse (exit status 2), with the commands it may be a
// typo of, or, for a file, the command that takes it.
func unknownCommand(root *cobra.Command, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return nil
	}
	name := args[0]
	switch name {
	case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
		return nil
	}
	for _, c := range root.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return nil
		}
	}
	if s := sniffPath(name); s.kind != kindMissing {
		return usageError{fmt.Errorf("%q is not a command but %s; %s", name, s.what, s.usage(name))}
	}
	hint := "attnrun --help lists the commands"
	if suggestions := root.SuggestionsFor(name); len(suggestions) > 0 {
		hint = "did you mean " + strings.Join(suggestions, " or ") + "? (" + hint + ")"
	}
	return usageError{fmt.Errorf("unknown command %q; %s", name, hint)}
}

// modelCommands take a model (a config, a preset or an ONNX file) as their
// argument; import takes an ONNX file.
var modelCommands = map[string]bool{"run": true, "check": true, "inspect": true, "export": true, "plot": true, "bench": true, "generate": true}

// checkArguments recognizes the file argument of a command by its content
// before the command runs, and refuses one of the wrong kind, saying what
// it is and what takes it.
func checkArguments(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	switch {
	case modelCommands[cmd.Name()]:
		if _, err := resolveModel(args[0]); err != nil {
			return err
		}
	case cmd.Name() == "import":
		if s := sniffPath(args[0]); s.kind != kindONNX && s.kind != kindMissing {
			return usageError{fmt.Errorf("%s is %s, not an ONNX file: import lifts ONNX graphs into attnrun layers; %s", args[0], s.what, s.usage(args[0]))}
		}
	}
	return nil
}

// completeModel completes a model argument: the preset names, and the
// shell's file names (configs and ONNX files).
func completeModel(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	list, err := models.Presets()
	if err != nil {
		return nil, cobra.ShellCompDirectiveDefault
	}
	var names []string
	for _, p := range list {
		if strings.HasPrefix(p.Name, toComplete) {
			names = append(names, p.Name+"\t"+p.Description)
		}
	}
	return names, cobra.ShellCompDirectiveDefault
}

// helpTemplate leads with what a command does, how it is called and
// examples, as kubectl and helm do; the details and the flags follow.
const helpTemplate = `{{.Short}}

Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if and .Long (ne .Long .Short)}}

{{.Long | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`
