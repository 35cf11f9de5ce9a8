package dev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/registrum/registrum/examples/plugins/eicar-verifier/eicar"
	"github.com/registrum/registrum/internal/secrets"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/sdk/verifier"
)

// scanner is the attachment scanner dev runs beside the host: the EICAR
// scan of examples/plugins/eicar-verifier, served over the http verifier
// kind (sdk/verifier.HTTPHandler) for every http verifier of the package
// whose endpoint is plain http on loopback. The package names the endpoint;
// dev serves it on its own port (--verifier-port) and points the compiled
// package's copy at that port (docs/decisions/attachment-storage.md,
// "Verification in dev").
type scanner struct {
	ln  net.Listener
	mux *http.ServeMux
	// IDs are the verifiers served, in package order.
	IDs []string
}

// devServed reports whether dev serves verifier v: an http verifier on a
// plain-http loopback endpoint.
func devServed(v model.Verifier) bool {
	if v.Kind != model.VerifierHTTP {
		return false
	}
	u, err := url.Parse(v.Endpoint)
	if err != nil || u.Scheme != "http" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// slotServed reports whether dev can verify uploads to slot s: it needs no
// verifier, or one dev serves.
func slotServed(p *model.Package, s *model.AttachmentSlot) bool {
	if s.Verification == nil {
		return true
	}
	for _, v := range p.Verifiers {
		if v.ID == s.Verification.Verifier {
			return devServed(v)
		}
	}
	return false
}

// startScanner listens on port (0 picks one) when the package has a
// verifier dev serves, points those verifiers' endpoints at it (recomputing
// the package's revision) and writes each one's bearer credential into the
// data folder's secrets (generated once, never printed). It returns nil
// when there is nothing to serve.
func startScanner(p *model.Package, data string, port int) (*scanner, error) {
	sc := &scanner{mux: http.NewServeMux()}
	paths := map[string]string{}
	root := filepath.Join(data, "secrets")
	for i, v := range p.Verifiers {
		if !devServed(v) {
			continue
		}
		if sc.ln == nil {
			ln, err := listen(port)
			if err != nil {
				return nil, fmt.Errorf("dev: attachment scanner: %w", err)
			}
			sc.ln = ln
		}
		u, _ := url.Parse(v.Endpoint)
		path := cmpPath(u.Path)
		if other, dup := paths[path]; dup {
			sc.ln.Close()
			return nil, fmt.Errorf("dev: verifiers %s and %s share the endpoint path %s; give each its own", other, v.ID, path)
		}
		paths[path] = v.ID
		if err := ensureCredential(root, v.AuthorizationRef); err != nil {
			sc.ln.Close()
			return nil, err
		}
		ref := v.AuthorizationRef
		cred := func() ([]byte, error) {
			b, err := secrets.ResolveFile(root, ref)
			return []byte(strings.TrimRight(string(b), "\r\n")), err
		}
		sc.mux.Handle("POST "+path, verifier.HTTPHandler(eicar.New(), cred, v.MaximumBytes))
		u.Host = sc.ln.Addr().String()
		p.Verifiers[i].Endpoint = u.String()
		sc.IDs = append(sc.IDs, v.ID)
	}
	if sc.ln == nil {
		return nil, nil
	}
	rev, err := model.ComputeRevision(p)
	if err != nil {
		sc.ln.Close()
		return nil, fmt.Errorf("dev: %w", err)
	}
	p.Revision = rev
	return sc, nil
}

// cmpPath is an endpoint's path, "/" when it has none.
func cmpPath(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// ensureCredential writes a random bearer credential for ref under root
// unless one is there.
func ensureCredential(root, ref string) error {
	name, err := secrets.ParseRef(ref)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	path := filepath.Join(root, filepath.FromSlash(name))
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	b := make([]byte, 32)
	rand.Read(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(b)), 0o600); err != nil {
		return fmt.Errorf("dev: write the scanner's credential: %w", err)
	}
	return nil
}

// Addr is the scanner's listening address.
func (sc *scanner) Addr() string { return sc.ln.Addr().String() }

// serve serves until ctx ends.
func (sc *scanner) serve(ctx context.Context) error {
	srv := &http.Server{Handler: sc.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(sc.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dev: attachment scanner: %w", err)
	}
	return nil
}
