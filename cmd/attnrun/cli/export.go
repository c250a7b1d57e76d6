package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newExportCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "export",
		Short:  "Export a model to ONNX (not yet available)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("export is not implemented yet") },
	}
}
