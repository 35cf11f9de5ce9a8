package project

import "github.com/registrum/registrum/model"

// capabilities converts the capability names a handler lists (sorted, as
// written) to the package's typed capabilities; unknown names are kept so
// that the loader refuses them by name.
func capabilities(names []string) []model.Capability {
	if names == nil {
		return nil
	}
	out := make([]model.Capability, len(names))
	for i, n := range names {
		out[i] = model.Capability(n)
	}
	return out
}
