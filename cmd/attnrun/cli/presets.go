package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/attnrun/attnrun/models"
)

func newPresetsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "presets",
		Short:   "List the built-in presets",
		Long:    "presets lists the models embedded in attnrun, each replaying a cell of the seed notebooks.",
		Example: "  attnrun presets\n  attnrun run seed-simple",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			list, err := models.Presets()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, p := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\n", p.Name, p.Source, p.Description)
			}
			return w.Flush()
		},
	}
}
