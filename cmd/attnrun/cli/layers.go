package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/attnrun/attnrun/registry"
)

func newLayersCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "layers",
		Short:   "List the registered layer types",
		Example: "  attnrun layers",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, info := range registry.Infos() {
				fmt.Fprintf(w, "%s\t%s\n", info.ID, info.Summary)
			}
			return w.Flush()
		},
	}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.Name(), args)}
	}
	return nil
}

// oneArg requires exactly one positional argument, named in the error.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("%s takes one argument, %s (got %d)", cmd.Name(), what, len(args))}
		}
		return nil
	}
}
