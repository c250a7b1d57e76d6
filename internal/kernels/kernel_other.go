//go:build !amd64

package kernels

// availableISAs lists the instruction sets usable on this machine, best
// first. Off amd64 only the portable Go kernels exist.
func availableISAs() []*isa { return []*isa{goISA} }
