package kernels

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChooseISA(t *testing.T) {
	sets := availableISAs()
	require.Same(t, goISA, sets[len(sets)-1], "the Go kernels are always available, last")
	require.Same(t, sets[0], chooseISA(sets, ""))
	require.Same(t, sets[0], chooseISA(sets, "0"))
	require.Same(t, goISA, chooseISA(sets, "1"))
	if cpu.avx512 {
		require.Equal(t, "avx512", sets[0].name)
	} else if cpu.avx2FMA {
		require.Equal(t, "avx2", sets[0].name)
	}
}

// TestNoAsmEnvironment runs this test binary again with ATTNRUN_NOASM=1
// and checks that the package started on the portable kernels.
func TestNoAsmEnvironment(t *testing.T) {
	if os.Getenv("KERNELS_TEST_PRINT_ISA") == "1" {
		os.Stdout.WriteString("ISA=" + ISA() + "\n")
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for env, want := range map[string]string{"1": "go", "": availableISAs()[0].name} {
		cmd := exec.Command(exe, "-test.run=^TestNoAsmEnvironment$", "-test.count=1")
		cmd.Env = append(os.Environ(), "KERNELS_TEST_PRINT_ISA=1", "ATTNRUN_NOASM="+env)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		require.True(t, strings.Contains(string(out), "ISA="+want+"\n"), "ATTNRUN_NOASM=%q: want ISA %s, got output %s", env, want, out)
	}
}
