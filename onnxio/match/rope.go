package match

import (
	"cmp"
	"fmt"
)

// Rotation is RoPE written out of standard ops that a registered reader
// found (RegisterRotation): Rope rotates Heads, (B, H, T, head_dim), into
// the value the reader was given.
type Rotation struct {
	Heads string
	Rope  Rope
}

// A RotationReader reads v as heads rotated by RoPE written out of
// standard ops (Hugging Face's rotate_half, its interleaved pairs): the
// rotation, nil when v is not computed so, or an error that says why v is
// rotated in a way the reader cannot lift. The lifter offers it the
// queries and keys of ONNX's Attention op, which the dynamo exporter
// leaves unfused when it does not write RotaryEmbedding.
type RotationReader func(g Graph, v string) (*Rotation, error)

// rotationReader is one registration.
type rotationReader struct {
	name string
	read RotationReader
}

var rotationReaders = newList(func(x, y rotationReader) int { return cmp.Compare(x.name, y.name) })

// RegisterRotation makes a rotation reader available to every lift. It is
// meant to be called from init and panics if the name is empty or taken,
// or read is nil.
func RegisterRotation(name string, read RotationReader) {
	rotationReaders.add("RegisterRotation", name, read == nil, rotationReader{name: name, read: read})
}

// Unrotated offers v to the registered rotation readers, in the order of
// their names, and returns the first rotation one finds; nil when none
// does, or the first error. A reader that panics is an error.
func Unrotated(g Graph, v string) (*Rotation, error) {
	var first error
	for _, r := range rotationReaders.all() {
		rot, err := readRotation(r, g, v)
		if rot != nil && err == nil {
			return rot, nil
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return nil, first
}

// readRotation runs one reader, recovering from a panic in it.
func readRotation(r rotationReader, g Graph, v string) (rot *Rotation, err error) {
	defer func() {
		if p := recover(); p != nil {
			rot, err = nil, fmt.Errorf("rotation reader %s: panic: %v", r.name, p)
		}
	}()
	return r.read(g, v)
}
