package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print attnrun's version, the Go version and the source revision",
		Example: "  attnrun version",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			printVersion(cmd.OutOrStdout(), info)
			return nil
		},
	}
}

// printVersion says which attnrun this is from its build information
// (nil if none): the module version (a tag for `go install ...@v1.2.3`,
// "(devel)" for a build from a clone), the Go toolchain, the platform
// and, when the build recorded it, the VCS revision with its time and
// whether the tree had local changes.
func printVersion(w io.Writer, info *debug.BuildInfo) {
	version, revision, when, modified := "(unknown)", "", "", false
	if info != nil {
		if v := info.Main.Version; v != "" {
			version = v
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	fmt.Fprintf(w, "attnrun %s\n", version)
	fmt.Fprintf(w, "go      %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if revision != "" {
		line := revision
		if when != "" {
			line += " (" + when + ")"
		}
		if modified {
			line += " with local changes"
		}
		fmt.Fprintf(w, "commit  %s\n", line)
	}
}
