package torchrand

// The parameters of the 32-bit Mersenne Twister (Matsumoto and Nishimura).
const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

// mt19937 is the Mersenne Twister engine behind torch's CPU generator
// (at::mt19937), which produces the same sequence as std::mt19937.
type mt19937 struct {
	state [mtN]uint32
	next  int // index of the next state word to temper and return
}

// seed initializes the state from the low 32 bits of seed, as
// std::mt19937's constructor and at::mt19937 do.
func (m *mt19937) seed(seed uint64) {
	m.state[0] = uint32(seed)
	for i := 1; i < mtN; i++ {
		prev := m.state[i-1]
		m.state[i] = 1812433253*(prev^(prev>>30)) + uint32(i)
	}
	m.next = mtN // the first draw regenerates the whole state
}

// uint32 returns the next output of the engine.
func (m *mt19937) uint32() uint32 {
	if m.next == mtN {
		m.regenerate()
	}
	y := m.state[m.next]
	m.next++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// regenerate computes the next 624 state words in place.
func (m *mt19937) regenerate() {
	for i := 0; i < mtN; i++ {
		y := m.state[i]&mtUpperMask | m.state[(i+1)%mtN]&mtLowerMask
		v := m.state[(i+mtM)%mtN] ^ y>>1
		if y&1 != 0 {
			v ^= mtMatrixA
		}
		m.state[i] = v
	}
	m.next = 0
}
