package torchrand

import "fmt"

// RandInt fills dst as torch.randint(low, high, size) fills an int64 tensor:
// values in [low, high), each random() (or random64() when the range is
// 2^32 or more) reduced modulo the range. Like PyTorch it accepts the small
// modulo bias. low must be less than high.
func (g *Generator) RandInt(dst []int64, low, high int64) error {
	if low >= high {
		return fmt.Errorf("torchrand: randint expects low < high, got low=%d >= high=%d", low, high)
	}
	span := uint64(high) - uint64(low) // wraps correctly for any int64 pair
	for i := range dst {
		var bits uint64
		if span >= 1<<32 {
			bits = g.Uint64()
		} else {
			bits = uint64(g.Uint32())
		}
		dst[i] = int64(bits%span + uint64(low))
	}
	return nil
}
