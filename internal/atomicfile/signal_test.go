//go:build unix

package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signalHelperDir names, in the environment of a child test process, the
// directory the child writes into until it is killed.
const signalHelperDir = "ATOMICFILE_SIGNAL_HELPER_DIR"

// TestSignalRemovesTempFiles runs a child process that is in the middle of
// a write (the temporary file holds data) when it gets SIGINT or SIGTERM:
// the temporary file must be gone, the destination untouched, and the child
// must die of the signal.
func TestSignalRemovesTempFiles(t *testing.T) {
	if dir := os.Getenv(signalHelperDir); dir != "" {
		writeUntilKilled(dir)
		return
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "out.bin"), []byte("old"), 0o644))
			cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRemovesTempFiles$")
			cmd.Env = append(os.Environ(), signalHelperDir+"="+dir)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			line, err := bufio.NewReader(stdout).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "writing\n", line)
			require.Len(t, dirEntries(t, dir), 2, "the temporary file exists mid-write")

			require.NoError(t, cmd.Process.Signal(sig))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatal("the child did not end on the signal")
			}
			status := cmd.ProcessState.Sys().(syscall.WaitStatus)
			assert.True(t, status.Signaled() && status.Signal() == sig || status.ExitStatus() == 128+int(sig),
				"want death by %v, got %v", sig, cmd.ProcessState)
			assert.Equal(t, []string{"out.bin"}, dirEntries(t, dir))
			got, err := os.ReadFile(filepath.Join(dir, "out.bin"))
			require.NoError(t, err)
			assert.Equal(t, "old", string(got))
		})
	}
}

// writeUntilKilled is the child: it starts a write that never finishes.
func writeUntilKilled(dir string) {
	CleanUpOnSignals()
	_ = Write(filepath.Join(dir, "out.bin"), 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, "partial data"); err != nil {
			return err
		}
		fmt.Println("writing")
		time.Sleep(time.Minute)
		return nil
	})
	os.Exit(3) // not reached when the signal works
}
