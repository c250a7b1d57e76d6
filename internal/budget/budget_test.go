package budget

import (
	"errors"
	"math"
	"sync"
	"testing"
)

func TestReserveAndRelease(t *testing.T) {
	b := New(100)
	if err := b.Reserve(60, "a"); err != nil {
		t.Fatal(err)
	}
	err := b.Reserve(50, `node "x" (Add): float32 (5, 10)`)
	if !errors.Is(err, ErrExceeded) {
		t.Fatalf("second reservation: %v, want ErrExceeded", err)
	}
	want := `node "x" (Add): float32 (5, 10) needs 50 B, over the memory budget of 100 B (60 B already in use)`
	if err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	b.Release(60)
	if err := b.Reserve(100, "b"); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if b.Used() != 100 {
		t.Errorf("Used %d, want 100", b.Used())
	}
}

func TestNilBudgetAppliesDefaultPerReservation(t *testing.T) {
	var b *Budget
	if err := b.Reserve(DefaultLimit, "all of it"); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(DefaultLimit+1, "one more"); !errors.Is(err, ErrExceeded) {
		t.Fatalf("got %v, want ErrExceeded", err)
	}
}

func TestOverflowedSizesAreRefused(t *testing.T) {
	if n := Elements([]int{1 << 40, 1 << 40}); n != -1 {
		t.Errorf("Elements overflow = %d, want -1", n)
	}
	if n := Elements([]int{3, -1}); n != -1 {
		t.Errorf("Elements negative = %d, want -1", n)
	}
	if n := Elements([]int{0, 1 << 62, 1 << 62}); n != 0 {
		t.Errorf("Elements with a zero dim = %d, want 0", n)
	}
	if n := Bytes(math.MaxInt64/2, 4); n != -1 {
		t.Errorf("Bytes overflow = %d, want -1", n)
	}
	if err := New(0).Reserve(-1, "x"); !errors.Is(err, ErrExceeded) {
		t.Errorf("negative reservation: %v", err)
	}
}

func TestConcurrentReservationsNeverExceedTheLimit(t *testing.T) {
	b := New(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.Reserve(30, "x") == nil {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if granted != 33 || b.Used() != 990 {
		t.Errorf("granted %d (used %d), want 33 (990)", granted, b.Used())
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"1GiB": 1 << 30, "512MiB": 512 << 20, "1.5g": 3 << 29, "2GB": 2e9, "1000": 1000, "64 KiB": 64 << 10, "7B": 7,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1GiB", "0", "1XB", "NaN", "1e30TiB"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 16 << 30: "16 GiB", 4 << 40: "4 TiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}
