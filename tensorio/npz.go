package tensorio

import (
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"gorgonia.org/tensor"

	"github.com/attnrun/attnrun/array"
	"github.com/attnrun/attnrun/internal/budget"
	"github.com/attnrun/attnrun/internal/regularfile"
)

// ReadNPZ reads the .npz archive at path (as np.savez or np.savez_compressed
// write it), using DefaultLimits. See Limits.ReadNPZ.
func ReadNPZ(path string) (names []string, tensors []*tensor.Dense, err error) {
	return DefaultLimits.ReadNPZ(path)
}

// ReadNPZFrom reads a .npz archive of size bytes from r, using
// DefaultLimits; for archives held in memory or embedded in the binary.
func ReadNPZFrom(r io.ReaderAt, size int64) (names []string, tensors []*tensor.Dense, err error) {
	return DefaultLimits.ReadNPZFrom(r, size)
}

// ReadNPZArrays reads the .npz archive at path as Arrays, using
// DefaultLimits. See Limits.ReadNPZArrays.
func ReadNPZArrays(path string) (names []string, arrays []*array.Array, err error) {
	return DefaultLimits.ReadNPZArrays(path)
}

// ReadNPZ reads the .npz archive at path: every member must be a .npy file,
// stored or deflated. It returns the keys (member names without ".npy") in
// archive order and the tensors in the same order. The archive must be a
// regular file. Errors start with the path and name the member. Members of
// zero elements, which *tensor.Dense cannot hold, are an error
// (ReadNPZArrays reads them).
func (l Limits) ReadNPZ(path string) (names []string, tensors []*tensor.Dense, err error) {
	names, arrays, err := l.ReadNPZArrays(path)
	if err != nil {
		return nil, nil, err
	}
	if tensors, err = denseMembers(names, arrays); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return names, tensors, nil
}

// ReadNPZArrays reads the .npz archive at path as Limits.ReadNPZ does,
// into Arrays: zero elements and every .npy dtype included.
func (l Limits) ReadNPZArrays(path string) (names []string, arrays []*array.Array, err error) {
	f, err := regularfile.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	names, arrays, err = l.ReadNPZArraysFrom(f, info.Size())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return names, arrays, nil
}

// ReadNPZFrom reads a .npz archive of size bytes from r; see Limits.ReadNPZ.
func (l Limits) ReadNPZFrom(r io.ReaderAt, size int64) (names []string, tensors []*tensor.Dense, err error) {
	names, arrays, err := l.ReadNPZArraysFrom(r, size)
	if err != nil {
		return nil, nil, err
	}
	if tensors, err = denseMembers(names, arrays); err != nil {
		return nil, nil, err
	}
	return names, tensors, nil
}

// denseMembers converts the arrays of an archive, naming the member that
// *tensor.Dense cannot hold.
func denseMembers(names []string, arrays []*array.Array) ([]*tensor.Dense, error) {
	tensors := make([]*tensor.Dense, len(arrays))
	for i, a := range arrays {
		d, err := toDense(a, nil)
		if err != nil {
			return nil, fmt.Errorf("member %q: %w", names[i]+".npy", err)
		}
		tensors[i] = d
	}
	return tensors, nil
}

// ReadNPZArraysFrom reads a .npz archive of size bytes from r; see
// Limits.ReadNPZArrays. The total decoded size of all arrays is held to
// l.MaxTotalBytes and reserved from the memory budget, checked against each
// member's declared sizes before reading it, and no member is read past
// the array its header declares, so a zip bomb cannot inflate.
func (l Limits) ReadNPZArraysFrom(r io.ReaderAt, size int64) (names []string, arrays []*array.Array, err error) {
	if isNil(r) {
		return nil, nil, errors.New("nil io.ReaderAt")
	}
	if size < 0 {
		return nil, nil, fmt.Errorf("negative archive size %d", size)
	}
	l = l.resolved()
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, nil, fmt.Errorf("not a valid .npz (zip) archive: %w", err)
	}
	mem := l.scope()
	defer mem.Release()
	room := l.MaxTotalBytes
	seen := map[string]bool{}
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("member %q is not a .npy file", f.Name)
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("member %q appears twice", f.Name)
		}
		seen[name] = true
		a, used, err := readNPZMember(f, l.MaxDims, l.room(room), mem)
		if err != nil {
			return nil, nil, fmt.Errorf("member %q: %w", f.Name, err)
		}
		room -= used
		names = append(names, name)
		arrays = append(arrays, a)
	}
	if len(names) == 0 {
		return nil, nil, errors.New("archive holds no arrays")
	}
	return names, arrays, nil
}

// readNPZMember decodes one member with at most room bytes of data,
// reserved from mem.
func readNPZMember(f *zip.File, maxRank int, room int64, mem *budget.Scope) (*array.Array, int64, error) {
	switch {
	case f.Flags&0x1 != 0:
		return nil, 0, errors.New("encrypted members are not supported")
	case f.Method != zip.Store && f.Method != zip.Deflate:
		return nil, 0, fmt.Errorf("compression method %d not supported (want stored or deflated)", f.Method)
	}
	// The declared size bounds the work up front. The element data is
	// never larger in the file than decoded, so a member declaring more
	// than the limit plus a maximal header cannot be accepted.
	if f.UncompressedSize64 > uint64(room)+maxNPYHeader+16 {
		return nil, 0, fmt.Errorf("declares %d bytes, more than the limit of %d: %w", f.UncompressedSize64, room, ErrLimit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	// archive/zip fails the read if the member is not as long as declared,
	// so the declared size also bounds what the header may claim.
	avail := int64(min(f.UncompressedSize64, math.MaxInt64))
	a, used, err := readNPY(br, avail, maxRank, room, mem)
	if err != nil {
		return nil, 0, err
	}
	// Reading to the end also makes archive/zip verify the CRC-32 and
	// the declared size.
	if err := expectEOF(br); err != nil {
		return nil, 0, err
	}
	return a, used, nil
}

// npzTime is the modification time written for every member: the earliest
// a zip file can record, so output depends only on the tensors.
var npzTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// WriteNPZ writes tensors to the .npz archive at path under names (keys
// without ".npy"), atomically. Members are stored uncompressed, as np.savez
// stores them, in the order given and with a fixed timestamp, so the same
// tensors always give the same bytes.
func WriteNPZ(path string, names []string, tensors []*tensor.Dense) error {
	return writeFile(path, func(w io.Writer) error { return WriteNPZTo(w, names, tensors) })
}

// WriteNPZTo writes the .npz archive WriteNPZ writes to w.
func WriteNPZTo(w io.Writer, names []string, tensors []*tensor.Dense) error {
	if isNil(w) {
		return errors.New("nil io.Writer")
	}
	if err := checkNames(names, tensors); err != nil {
		return err
	}
	arrays := make([]*array.Array, len(tensors))
	for i, t := range tensors {
		a, _, err := denseArray(t)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", names[i], err)
		}
		arrays[i] = a
	}
	return WriteNPZArraysTo(w, names, arrays)
}

// WriteNPZArrays writes arrays to the .npz archive at path under names, as
// WriteNPZ writes tensors, with each array's dtype as WriteNPYArray writes
// it; zero elements included.
func WriteNPZArrays(path string, names []string, arrays []*array.Array) error {
	return writeFile(path, func(w io.Writer) error { return WriteNPZArraysTo(w, names, arrays) })
}

// WriteNPZArraysTo writes the .npz archive WriteNPZArrays writes to w.
func WriteNPZArraysTo(w io.Writer, names []string, arrays []*array.Array) error {
	if isNil(w) {
		return errors.New("nil io.Writer")
	}
	if err := checkNameList(names, len(arrays), func(i int) bool { return arrays[i] == nil }); err != nil {
		return err
	}
	zw := zip.NewWriter(w)
	for i, name := range names {
		member, err := zw.CreateHeader(&zip.FileHeader{
			Name:     name + ".npy",
			Method:   zip.Store,
			Modified: npzTime,
		})
		if err != nil {
			return err
		}
		if err := WriteNPYArray(member, arrays[i]); err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
	}
	return zw.Close()
}

// checkNames validates the names and tensors given to a writer.
func checkNames(names []string, tensors []*tensor.Dense) error {
	return checkNameList(names, len(tensors), func(i int) bool { return tensors[i] == nil })
}

// checkNameList validates the names of n tensors given to a writer; isNil
// tells a missing tensor.
func checkNameList(names []string, n int, isNil func(int) bool) error {
	if len(names) != n {
		return fmt.Errorf("%d names for %d tensors", len(names), n)
	}
	seen := map[string]bool{}
	for i, name := range names {
		if name == "" {
			return fmt.Errorf("tensor %d has an empty name", i)
		}
		if seen[name] {
			return fmt.Errorf("name %q appears twice", name)
		}
		seen[name] = true
		if isNil(i) {
			return fmt.Errorf("tensor %q is nil", name)
		}
	}
	return nil
}
