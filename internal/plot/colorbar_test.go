package plot

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		vmax float64
		want []string
	}{
		{1, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{0.45, []string{"0.0", "0.1", "0.2", "0.3", "0.4"}},
		{0.3, []string{"0.0", "0.1", "0.2", "0.3"}},
		{0.62, []string{"0.0", "0.2", "0.4", "0.6"}},
		{0.75, []string{"0.0", "0.2", "0.4", "0.6", "0.75"}}, // the top, far from 0.6
		{0.05, []string{"0.00", "0.01", "0.02", "0.03", "0.04", "0.05"}},
		{2, []string{"0.0", "0.5", "1.0", "1.5", "2.0"}},
		{1.25, []string{"0.00", "0.25", "0.50", "0.75", "1.00", "1.25"}},
		{40, []string{"0", "10", "20", "30", "40"}},
	} {
		var got []string
		for _, tk := range ticks(tc.vmax) {
			got = append(got, tk.label)
		}
		assert.Equal(t, tc.want, got, "ticks(%g)", tc.vmax)
	}
}
