//go:build !unix

package regularfile

// nonblock is 0 where opening a file cannot block on a FIFO the Unix way.
const nonblock = 0
