// Package catalog holds named entries registered once each, safe for
// concurrent use: the layer types of package registry and the score
// modifications of package layers, both filled from init functions and
// read by every model built afterwards.
package catalog

import (
	"slices"
	"sync"
)

// Catalog maps names to entries. The zero value is empty and ready.
type Catalog[T any] struct {
	mu      sync.RWMutex
	entries map[string]T
}

// Add registers entry under name. It reports false, changing nothing,
// when the name is taken.
func (c *Catalog[T]) Add(name string, entry T) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, taken := c.entries[name]; taken {
		return false
	}
	if c.entries == nil {
		c.entries = map[string]T{}
	}
	c.entries[name] = entry
	return true
}

// Get returns the entry registered under name, and whether there is one.
func (c *Catalog[T]) Get(name string) (T, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	entry, ok := c.entries[name]
	return entry, ok
}

// Names returns the registered names, sorted.
func (c *Catalog[T]) Names() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	names := make([]string, 0, len(c.entries))
	for name := range c.entries {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// All returns the entries sorted by name.
func (c *Catalog[T]) All() []T {
	names := c.Names()
	c.mu.RLock()
	defer c.mu.RUnlock()
	all := make([]T, 0, len(names))
	for _, name := range names {
		if entry, ok := c.entries[name]; ok {
			all = append(all, entry)
		}
	}
	return all
}
