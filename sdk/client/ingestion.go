package client

import (
	"context"

	"github.com/registrum/registrum/sdk/ingest"
)

// Ingestion returns the ingestion-run client (sdk/ingest) of a batch route,
// sharing this client's address, HTTP client and tokens. It plans a JSONL
// source with the SDK's one greedy-canonical-http-batch-v1 chunker, opens
// a run bound to the active package, and uploads the chunks in order,
// resuming from the run's nextChunkIndex after any failure:
//
//	ic := c.Ingestion("cases", "caseworker")
//	b, _ := ic.Binding(ctx)
//	plan, _ := ingest.PlanFile(path, ingest.Create, b.Bounds)
//	run, _ := ic.Open(ctx, plan, b)
//	run, err := ic.Upload(ctx, run, plan, file, nil)
//
// profile is the access profile the run is bound to.
func (c *Client) Ingestion(route, profile string) *ingest.Client {
	ic := &ingest.Client{BaseURL: c.base.String(), Route: route, Profile: profile, HTTP: c.http}
	if c.tokens != nil {
		ic.Token = func(ctx context.Context) (string, error) {
			tok, err := c.tokens.Token(ctx)
			if err != nil {
				return "", err
			}
			return tok.AccessToken, nil
		}
	}
	return ic
}
