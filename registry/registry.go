// Package registry is the contract between attnrun and its layers, and the
// registry where layer types announce themselves.
//
// A layer type registers itself from an init function, the way database/sql
// drivers do:
//
//	func init() {
//		registry.Register(registry.Info{
//			ID:      "attention.cosine",
//			Summary: "cosine-similarity attention",
//			New:     func() registry.Layer { return &Cosine{Scale: 10} },
//		})
//	}
//
// A program that blank-imports the package can then build the layer from a
// model config by its ID.
package registry

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/attnrun/attnrun/internal/catalog"
)

// Info describes a layer type: its ID, a one-line summary, and a constructor.
type Info struct {
	// ID is the dotted, lowercase "namespace.name" used as `type:` in configs.
	ID string
	// Summary is one line for `attnrun layers`.
	Summary string
	// New returns a fresh layer with its configuration defaults filled in.
	// The model decodes the YAML config into it, then calls Validate.
	New func() Layer
}

// infos are the registered layer types, by ID.
var infos catalog.Catalog[Info]

// idPattern is namespace.name, each part lowercase letters, digits and
// underscores, starting with a letter.
var idPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)

// Register makes a layer type available by its ID. It is meant to be called
// from init and panics if the ID is empty, malformed or already registered, or
// if New is nil: these are programming errors that must surface at start-up.
func Register(info Info) {
	if info.ID == "" {
		panic("registry: Register with an empty layer ID")
	}
	if !idPattern.MatchString(info.ID) {
		panic(fmt.Sprintf("registry: layer ID %q is not a dotted lowercase namespace.name", info.ID))
	}
	if info.New == nil {
		panic(fmt.Sprintf("registry: Register %q with a nil constructor", info.ID))
	}
	if !infos.Add(info.ID, info) {
		panic(fmt.Sprintf("registry: Register called twice for layer %q", info.ID))
	}
}

// BuiltinPackage is the import path of the package whose init functions
// register attnrun's built-in layers. A program builds models of them after
// a blank import of it (or an import of the front package
// github.com/attnrun/attnrun, which does that import).
const BuiltinPackage = "github.com/attnrun/attnrun/layers"

// Lookup returns the registered layer type with the given ID. An unknown ID is
// an error that lists every registered ID and names the package that
// registers the built-in layers, since a missing import is the usual cause.
func Lookup(id string) (Info, error) {
	info, ok := infos.Get(id)
	if !ok {
		return Info{}, unknownID(id, IDs())
	}
	return info, nil
}

// unknownID is Lookup's error for an ID that is not among registered.
func unknownID(id string, registered []string) error {
	hint := fmt.Sprintf("built-in layers need import _ %q", BuiltinPackage)
	if len(registered) == 0 {
		return fmt.Errorf("unknown layer type %q (forgotten import?): no layer type is registered; %s", id, hint)
	}
	return fmt.Errorf("unknown layer type %q (forgotten import?); registered: %s; %s",
		id, strings.Join(registered, ", "), hint)
}

// IDs returns the registered layer IDs, sorted.
func IDs() []string { return infos.Names() }

// Infos returns every registered layer type, sorted by ID.
func Infos() []Info { return infos.All() }
