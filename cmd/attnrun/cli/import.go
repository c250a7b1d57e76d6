package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newImportCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "import",
		Short:  "Lift an ONNX graph into attnrun layers (not yet available)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("import is not implemented yet") },
	}
}
