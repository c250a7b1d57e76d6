package budget

// Scope is the reservations one piece of work (reading a file, decoding a
// test-data set) takes from a Budget, released together when the work
// ends. Within a scope, reservations add up: a file of 64 tensors of 1 GiB
// is refused even though each would fit on its own. A Scope is not safe for
// concurrent use; the Budget under it is.
type Scope struct {
	b    *Budget
	held int64
}

// NewScope returns a scope on b; a nil b means a fresh budget of
// DefaultLimit, so that the scope's reservations still add up.
func NewScope(b *Budget) *Scope {
	if b == nil {
		b = New(DefaultLimit)
	}
	return &Scope{b: b}
}

// Reserve takes n bytes for what from the scope's budget; see
// Budget.Reserve.
func (s *Scope) Reserve(n int64, what string) error {
	if err := s.b.Reserve(n, what); err != nil {
		return err
	}
	s.held += n
	return nil
}

// Release returns everything the scope reserved.
func (s *Scope) Release() {
	s.b.Release(s.held)
	s.held = 0
}
