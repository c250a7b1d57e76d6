// Package yamlkeys lists the keys yaml.v3 decodes into a struct, for the
// strict decoding of configs (layers in models, score modifications in
// layers): a key the struct does not have is an error that names the
// ones it has.
package yamlkeys

import (
	"reflect"
	"sort"
	"strings"
)

// Of lists the keys yaml.v3 decodes into a struct type t (or a pointer to
// one): tag names, lowercased field names when untagged, and the keys of
// inline fields; fields tagged "-" and unexported fields are none.
func Of(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-":
		case strings.Contains(opts, "inline"):
			for k := range Of(f.Type) {
				out[k] = true
			}
		case name == "":
			out[strings.ToLower(f.Name)] = true
		default:
			out[name] = true
		}
	}
	return out
}

// Sorted returns the keys in order.
func Sorted(keys map[string]bool) []string {
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
