package tensorio

import "reflect"

// isNil reports whether an interface argument is nil or holds a nil
// pointer: a typed nil *bytes.Reader passed as an io.Reader would panic
// on its first read.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
