package generate

import (
	"bytes"
	"io"

	"github.com/registrum/registrum/model"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// declaredOpenAPI returns the document of every route the package declares,
// as if every capability were served.
func declaredOpenAPI(p *model.Package) ([]byte, error) {
	ops, err := allOperations(p)
	if err != nil {
		return nil, err
	}
	return openAPI(p, ops)
}
