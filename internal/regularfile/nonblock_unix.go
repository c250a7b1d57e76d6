//go:build unix

package regularfile

import "syscall"

// nonblock makes opening a FIFO return at once instead of waiting for a
// writer; reads of regular files ignore it.
const nonblock = syscall.O_NONBLOCK
