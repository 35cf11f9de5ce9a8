package plugins

import (
	"context"

	"github.com/registrum/registrum/model"
)

// CallEngine runs only module id's engine on input: no input check, no
// output decoding or validation. Benchmarks use it to separate the sandbox's
// cost from the host's checks.
func (s *Set) CallEngine(ctx context.Context, id string, input []byte) ([]byte, error) {
	l := s.modules[id]
	var parsed any
	if l.Engine == model.EngineTengo {
		parsed, _ = checkInput(l.Kind, input)
	}
	return l.prog.call(ctx, l.Kind, input, parsed)
}
