package catalog

import (
	"fmt"
	"sync"
	"testing"
)

// TestCatalog registers entries out of order, refuses a taken name, and
// lists names and entries sorted.
func TestCatalog(t *testing.T) {
	var c Catalog[int]
	if _, ok := c.Get("a"); ok || len(c.Names()) != 0 || len(c.All()) != 0 {
		t.Fatal("the zero catalog is not empty")
	}
	for _, name := range []string{"b", "c", "a"} {
		if !c.Add(name, int(name[0])) {
			t.Fatalf("Add(%q) refused", name)
		}
	}
	if c.Add("b", 0) {
		t.Fatal("Add took a taken name")
	}
	if v, ok := c.Get("b"); !ok || v != 'b' {
		t.Fatalf("Get(b) = %d, %v; want %d (the first registration)", v, ok, 'b')
	}
	if got := fmt.Sprint(c.Names(), c.All()); got != "[a b c] [97 98 99]" {
		t.Fatalf("Names, All = %s", got)
	}
}

// TestCatalogConcurrent adds and reads from many goroutines (go test
// -race checks the locking).
func TestCatalogConcurrent(t *testing.T) {
	var c Catalog[int]
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Add(fmt.Sprint(i%10), i)
			c.Get("3")
			c.All()
		}()
	}
	wg.Wait()
	if n := len(c.Names()); n != 10 {
		t.Fatalf("%d names, want 10", n)
	}
}
