package lift

import "github.com/attnrun/attnrun/registry"

// hidden lists layer types the lift must act as if they were not
// registered: tests use it to see what a build without them reports.
var hidden = map[string]bool{}

// registered reports whether a layer type is available to lift into.
func registered(id string) bool {
	_, err := registry.Lookup(id)
	return err == nil && !hidden[id]
}
