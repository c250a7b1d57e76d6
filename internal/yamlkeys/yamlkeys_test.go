package yamlkeys

import (
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	Base float64 `yaml:"base"`
}

type config struct {
	D        int `yaml:"d"`
	NumHeads int `yaml:"num_heads,omitempty"`
	Plain    bool
	Skipped  int   `yaml:"-"`
	Nested   inner `yaml:",inline"`
	hidden   int
}

// TestOfListsWhatYAMLDecodes checks the keys against yaml.v3's rules:
// tags, lowercased names, inline fields; not "-" or unexported fields.
func TestOfListsWhatYAMLDecodes(t *testing.T) {
	_ = config{}.hidden
	got := strings.Join(Sorted(Of(reflect.TypeOf(&config{}))), ",")
	if want := "base,d,num_heads,plain"; got != want {
		t.Errorf("Of = %s, want %s", got, want)
	}
	if got := Of(reflect.TypeOf(3)); len(got) != 0 {
		t.Errorf("Of(int) = %v, want none", got)
	}
}
