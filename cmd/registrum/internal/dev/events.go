package dev

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/registrum/registrum/examples/webhookreceiver"
	"github.com/registrum/registrum/model"
	"github.com/registrum/registrum/sdk/webhook"
)

// receiverLogName is the example receiver's log in the data folder;
// receiverAddrName keeps its address across runs.
const (
	receiverLogName  = "webhook-receiver.log"
	receiverAddrName = "webhook-receiver.addr"
)

// receiverPath is the request path of the example receiver.
const receiverPath = "/registry-events"

// devInstance names the dev deployment in event sources.
const devInstance = "dev"

// devEvents is the event part of a dev system: the configuration block
// binding the package's url hooks, and the example receiver when dev runs
// one.
type devEvents struct {
	config  string
	logPath string
	own     *fragment // the operator's own destinations file, when given
	srv     *http.Server
	ln      net.Listener
	logFile *os.File
	dests   []string
}

// startEvents binds every destination the package's url hooks name: to
// the operator's own eventDestinations file (own, see readOwnEvents) when
// one is given, otherwise to
// the example receiver, started here on loopback with a signing key kept in
// the data folder's secrets and a log in the data folder.
func startEvents(ctx context.Context, own *fragment, data string, p *model.Package) (*devEvents, error) {
	ev := &devEvents{}
	ceiling := 0
	for _, e := range p.Entities {
		for _, h := range e.Hooks {
			if h.Handler != nil && h.Handler.Kind == model.HandlerURL && !slices.Contains(ev.dests, h.Handler.DestinationID) {
				ev.dests = append(ev.dests, h.Handler.DestinationID)
			}
			if r := model.ClassificationRank(h.Classification); h.Handler != nil && h.Handler.Kind == model.HandlerURL && r > ceiling {
				ceiling = r
			}
		}
	}
	if own != nil {
		ev.config, ev.own = own.text, own
		return ev, nil
	}
	if len(ev.dests) == 0 {
		return ev, nil
	}
	keyPath := filepath.Join(data, "secrets", "webhook-key")
	if err := os.MkdirAll(filepath.Dir(keyPath), 0o700); err != nil {
		return nil, fmt.Errorf("dev: %w", err)
	}
	if _, err := os.Stat(keyPath); errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		rand.Read(key)
		if err := os.WriteFile(keyPath, key, 0o600); err != nil {
			return nil, fmt.Errorf("dev: write webhook key: %w", err)
		}
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("dev: %w", err)
	}
	ev.logPath = filepath.Join(data, receiverLogName)
	if ev.logFile, err = os.OpenFile(ev.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err != nil {
		return nil, fmt.Errorf("dev: receiver log: %w", err)
	}
	// The receiver keeps its address across runs: the destination's binding
	// (its URL) must not change under deliveries still pending.
	addrPath := filepath.Join(data, receiverAddrName)
	addr := "127.0.0.1:0"
	if b, err := os.ReadFile(addrPath); err == nil {
		addr = strings.TrimSpace(string(b))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		ev.logFile.Close()
		return nil, fmt.Errorf("dev: the example receiver cannot listen on %s again (the event destination's address must stay as it was while deliveries are pending): %w", addr, err)
	}
	if err := os.WriteFile(addrPath, []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		ln.Close()
		ev.logFile.Close()
		return nil, fmt.Errorf("dev: %w", err)
	}
	source := "urn:engine:registry:" + p.Registry.ID + ":instance:" + devInstance
	rcv := webhookreceiver.New(&webhook.Verifier{Key: key, Path: receiverPath, Source: source}, ev.logFile)
	ev.srv, ev.ln = &http.Server{Handler: rcv, ReadHeaderTimeout: 10 * time.Second}, ln
	go ev.srv.Serve(ln)
	var b strings.Builder
	b.WriteString("\n# Event destinations: the example receiver dev runs (see " + ev.logPath + ").\ninstanceId: " + devInstance + "\neventDestinations:\n")
	for _, id := range ev.dests {
		fmt.Fprintf(&b, "  %s:\n    url: http://%s%s\n    hmacSha256KeyRef: secret:file/webhook-key\n    classificationCeiling: %s\n    network: loopback\n",
			id, ln.Addr(), receiverPath, model.Classifications[ceiling])
	}
	ev.config = b.String()
	return ev, nil
}

func (ev *devEvents) close() {
	if ev.srv != nil {
		ev.srv.Close()
		ev.ln.Close() // at once, even when Serve has not started yet
	}
	if ev.logFile != nil {
		ev.logFile.Close()
	}
}

// readOwnEvents reads the operator's --event-destinations file (nil when
// none is given), dev's instanceId put before it when it gives none.
func readOwnEvents(o Options, data string) (*fragment, error) {
	if o.EventDestinations == "" {
		return nil, nil
	}
	return readFragment("--event-destinations", o.EventDestinations, []string{"eventDestinations", "instanceId"},
		filepath.Join(data, "secrets"), map[string]string{"instanceId": "instanceId: " + devInstance})
}
