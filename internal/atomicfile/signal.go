package atomicfile

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// inFlight holds the temporary files of the writes in progress. A name is
// recorded before its file is created and forgotten after it is renamed or
// removed, so no temporary file exists unrecorded.
var inFlight = struct {
	sync.Mutex
	names map[string]bool
}{names: map[string]bool{}}

func remember(name string) {
	inFlight.Lock()
	inFlight.names[name] = true
	inFlight.Unlock()
}

func forget(name string) {
	inFlight.Lock()
	delete(inFlight.names, name)
	inFlight.Unlock()
}

var handleSignals sync.Once

// CleanUpOnSignals makes SIGINT and SIGTERM remove the temporary files of
// the writes in progress before the process ends. The process then dies of
// the same signal, as it would have without the handler (a shell reports
// status 130 or 143), or exits with 128 plus the signal's number where it
// cannot re-raise it. A command line calls it once, first thing in main;
// later calls do nothing.
func CleanUpOnSignals() {
	handleSignals.Do(func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-signals
			// Hold the lock until the process ends: a write starting
			// now waits instead of creating a file nobody removes.
			inFlight.Lock()
			for name := range inFlight.names {
				os.Remove(name)
			}
			die(sig)
		}()
	})
}

// die ends the process with sig: the default action is restored and the
// signal sent again.
func die(sig os.Signal) {
	signal.Reset(sig)
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Signal(sig)
	}
	time.Sleep(2 * time.Second) // delivery is asynchronous
	code := 1
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	os.Exit(code)
}
